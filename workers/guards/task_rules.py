"""The task's rules held for its writes: the tests a task keeps as they are are read-only to
the agent's writes for the run, each refusal one line pointing at the code instead.

A small model whose code fails the tests rewrites the tests: four or five replies cut off
at the output cap, a minute each, on a task that said "Do not modify the tests". A task
that says so keeps every test file as it is; one that names its test command (and asks
for no change to tests) keeps the tests that command runs, for a small model (the run is
judged by them). A write, edit or file block aimed at one is refused before it runs, as
a tool result the model reads, and nothing asks for it again.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from workers.guards.test_runs import is_test_file, named_test_command, status_command
from workers.tools.base import ToolError
from workers.tools.workspace import read_confined, relative, resolve

# The tests, in a task's words: "the tests", "any test files", "test_calc.py"; never "the
# test command" or "the test runner", which are not files.
_TESTS = (
    r"(?:(?:the\s+|any\s+|existing\s+|of\s+the\s+)*(?:unit\s+)?tests?(?:\s+files?|\s+suite)?"
    r"|`?(?:[\w/.-]*/)?(?:test_\w+|\w+_test)\.py`?)\b"
    r"(?!\s+(?:command|runner|run|script|harness|output)s?\b)"
)
_CHANGE = r"(?:modify|modifying|change|changing|edit|editing|touch|touching|alter|altering|update|updating|rewrite|rewriting|delete|deleting)"
# "Do not modify the tests", "don't touch any test files", "without changing the tests",
# "the tests must not be changed", "leave the tests as they are", "fix the code, not the
# tests".
_FORBIDS = re.compile(
    rf"\b(?:do\s+not|don't|never|must\s+not|should\s+not|without)\s+{_CHANGE}\s+{_TESTS}"
    rf"|\b{_TESTS}\s+(?:must|should|may)\s+not\s+be\s+\w+"
    rf"|\bleave\s+{_TESTS}\s+(?:alone|as\s+they\s+are|unchanged)"
    rf"|,\s*not\s+{_TESTS}",
    re.IGNORECASE,
)
# "Add a test for …", "update the tests", "fix the failing test", "cover it with tests":
# the task asks for a change to tests, and its test command keeps nothing.
_ASKS = re.compile(
    rf"\b(?:write|add|create|extend|fix|{_CHANGE})\s+(?:a\s+|new\s+|more\s+|the\s+failing\s+|failing\s+)*{_TESTS}"
    r"|\bcover\s+[^.\n]{0,60}?\bwith\s+(?:\w+\s+)?tests?\b",
    re.IGNORECASE,
)
_NEGATED = re.compile(r"(?:not|n't|never|without)\s*$", re.IGNORECASE)
# Files with tests in them besides those named like tests: pytest's fixtures.
TEST_SUPPORT = frozenset({"conftest.py"})
REFUSED = (
    "refused: {path} is one of the task's tests, which stay as they are in this run ({why}); "
    "nothing was written. Change {code} instead."
)


def forbids_test_changes(task: str) -> bool:
    return _FORBIDS.search(task) is not None


def asks_for_test_changes(task: str) -> bool:
    """Whether the task asks for a test to be written or changed (not "do not modify")."""
    return any(
        not _NEGATED.search(task[max(0, m.start() - 12) : m.start()]) for m in _ASKS.finditer(task)
    )


@dataclass(frozen=True)
class KeptTests:
    """The tests a task keeps as they are: every test file, or those under `paths`."""

    why: str
    paths: tuple[str, ...] = ()
    """Workspace-relative files and folders the test command names; () is all."""

    def keeps(self, rel: str) -> bool:
        if not (is_test_file(rel) or os.path.basename(rel) in TEST_SUPPORT):
            return False
        return not self.paths or any(
            rel == p or rel.startswith(p.rstrip("/") + "/") for p in self.paths
        )


def kept_tests(
    task: str, workspace: Path, runners: Iterable[str] = (), *, by_command: bool = True
) -> KeptTests | None:
    """What the task's rules keep from the agent's writes: every test when it says not to
    change them; else (`by_command`) the tests its named test command runs, unless it
    asks for a change to tests. None: nothing."""
    if forbids_test_changes(task):
        return KeptTests("the task says not to modify the tests")
    command = named_test_command(task, runners) if by_command else None
    if command is None or asks_for_test_changes(task):
        return None
    words = status_command(command) or []
    paths = tuple(p for word in words[1:] if (p := _in_workspace(workspace, word)) is not None)
    return KeptTests(f"the task's test command `{command}` runs them", paths)


def _in_workspace(workspace: Path, word: str) -> str | None:
    """The workspace-relative path a command's word names, when it is one that exists."""
    if word.startswith("-"):
        return None
    word = word.split("::", 1)[0]  # pytest's test_x.py::test_name
    try:
        real = resolve(workspace, word)
    except ToolError:
        return None
    rel = relative(workspace, real)
    return rel if real.exists() and rel != "." else None


def refusal(kept: KeptTests, rel: str, workspace: Path, seen: Iterable[str]) -> str:
    """The one line a write aimed at a kept test gets."""
    code = code_under_test(workspace, rel, seen)
    return REFUSED.format(path=rel, why=kept.why, code=code or "the code they test")


def code_under_test(workspace: Path, test: str, seen: Iterable[str] = ()) -> str | None:
    """The code file a test file tests: one named like it without `test_`, or a module of
    the workspace it imports; a file the agent has read first."""
    name = os.path.basename(test)
    stem = name.removeprefix("test_").removesuffix(".py").removesuffix("_test")
    modules = [stem, *_imported(workspace, test)]
    folders = [os.path.dirname(test), os.path.dirname(os.path.dirname(test)), ""]
    candidates = [
        os.path.normpath(os.path.join(folder, *module.split("."))) + ".py"
        for module in modules
        for folder in folders
    ]
    known = [c for c in candidates if c in set(seen)]
    for candidate in known + candidates:
        if not is_test_file(candidate) and (workspace / candidate).is_file():
            return candidate
    return None


def _imported(workspace: Path, test: str) -> list[str]:
    """The modules a test file imports, in order; none when it cannot be read or parsed."""
    try:
        data = read_confined(workspace, test, 1024 * 1024)
        tree = ast.parse(data or b"")
    except (ToolError, OSError, SyntaxError, ValueError):
        return []
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return found
