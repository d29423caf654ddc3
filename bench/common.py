"""What every benchmark returns: named ratios and figures measured in one run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    name: str
    value: float
    unit: str
    target: str = ""
    ok: bool | None = None
    """None when the row has no target to meet."""


_tiny = False


@contextlib.contextmanager
def tiny_sizes() -> Iterator[None]:
    """Within the block every benchmark runs at its tiny size: each of its code paths,
    in seconds, for the test that none has silently broken (tests/test_bench.py)."""
    global _tiny
    _tiny = True
    try:
        yield
    finally:
        _tiny = False


def size(full: int, tiny: int) -> int:
    """A benchmark's size: `full`, or `tiny` inside `tiny_sizes()`."""
    return tiny if _tiny else full
