"""Parsing Python source where threads may do it at once (parallel readers, a cluster
node's workers in one process).

CPython 3.11 tracks the AST constructor's recursion depth per interpreter, not per call:
two threads building trees at once can fail with "SystemError: AST constructor recursion
depth mismatch" (CPython gh-106905; a cluster test saw it on two explorers). One lock
makes the parses take turns; each takes milliseconds.
"""

from __future__ import annotations

import ast
import threading

_ONE_AT_A_TIME = threading.Lock()


def parse(source: str | bytes) -> ast.Module:
    """`ast.parse(source)`, one thread at a time; SyntaxError or ValueError as it raises."""
    with _ONE_AT_A_TIME:
        return ast.parse(source)
