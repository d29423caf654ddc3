"""The task's rules held for its writes: the tests a task keeps as they are are read-only to
the agent's writes for the run, each refusal one line pointing at the code instead.

A small model whose code fails the tests rewrites the tests: four or five replies cut off
at the output cap, a minute each, on a task that said "Do not modify the tests". A task
that says so keeps every test file as it is; one that names its test command (and asks
for no change to tests) keeps the tests that command runs, for a small model (the run is
judged by them). A write, edit or file block aimed at one is refused before it runs, as
a tool result the model reads, and nothing asks for it again.

Shell commands are held to the same rule by the sandbox, not by reading them: in a
container the kept tests there are at the start are read-only mounts (`kept_files`).
What a command changes of them anyway (on the host, or past a mount) is the agent's to
answer for: its change set shows it, and gaffer's own check (workers/check/) runs the
tests as they were at the start, whatever the workspace holds.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from workers import python_source
from workers.check.choose import named_command
from workers.guards.test_runs import is_test_file, status_command
from workers.tools.base import ToolError
from workers.tools.workspace import read_confined, relative, resolve

# The tests, in a task's words: "the tests", "any test files", "test_calc.py"; never "the
# test command" or "the test runner", which are not files.
_TESTS = (
    r"(?:(?:the\s+|any\s+|existing\s+|provided\s+|given\s+|original\s+|of\s+the\s+)*"
    r"(?:unit\s+)?tests?(?:\s+files?|\s+suite)?"
    r"|(?:any\s+)?files?\s+(?:in|under)\s+`?tests/?`?"
    r"|`?(?:[\w/.-]*/)?(?:test_\w+|\w+_test)\.py`?)\b"
    r"(?!\s+(?:command|runner|run|script|harness|output)s?\b)"
)
_CHANGE = r"(?:modify|modifying|change|changing|edit|editing|touch|touching|alter|altering|update|updating|rewrite|rewriting|delete|deleting)"
# "Do not modify the tests", "don't touch any test files", "without changing the tests",
# "the tests must not be changed", "leave the tests as they are", "fix the code, not the
# tests".
# "modify or delete", "change, move or delete"
_CHANGES = (
    rf"{_CHANGE}(?:\s*(?:,|/|\bor\b|\band\b)\s*"
    rf"(?:{_CHANGE}|move|moving|remove|removing|rename|renaming|add|adding|create|creating))*"
)
_FORBIDS = re.compile(
    rf"\b(?:do\s+not|don't|never|must\s+not|should\s+not|may\s+not|cannot|can't|without)"
    rf"\s+{_CHANGES}\s+(?:anything\s+(?:in|under)\s+)?{_TESTS}"
    rf"|\b{_TESTS}\s+(?:must|should|may)\s+not\s+be\s+\w+"
    rf"|\b{_TESTS}\s+(?:are|is)\s+read[\s-]only"
    rf"|\b{_TESTS}\s+(?:must|should)\s+(?:remain|stay)\s+(?:unchanged|untouched|as\s+(?:they\s+are|is))"
    rf"|\bno\s+(?:changes|edits|modifications)\s+to\s+{_TESTS}"
    rf"|\b{_CHANGE}\s+{_TESTS}\s+is\s+not\s+allowed"
    rf"|\bleave\s+{_TESTS}\s+(?:alone|as\s+(?:they\s+are|is)|unchanged|untouched)"
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
# Kept tests mounted read-only one by one in a container; a suite with more is held by
# gaffer's check alone beyond these (it runs them as they were at the start).
MAX_READ_ONLY = 128
# Folders no test of the project's own lives in, and that can hold thousands of files.
NOT_THE_PROJECTS = frozenset({"node_modules", "__pycache__", "site-packages", "venv"})
# Files that decide what a test run runs, wherever they are: kept with the tests, and
# kept from being made (a new conftest.py can turn every failure into a pass).
TEST_SUPPORT = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "tox.ini"})
# Files that may hold pytest's settings among others: a new one is kept from being made
# (one there already is the project's own to change).
NEW_SETTINGS = frozenset({"pyproject.toml", "setup.cfg"})
REFUSED = (
    "refused: {path} is one of the task's tests, which stay as they are in this run ({why}); "
    "nothing was written. Change {code} instead."
)


def forbids_test_changes(task: str) -> bool:
    return _FORBIDS.search(task) is not None


def asks_for_test_changes(task: str) -> bool:
    """Whether the task asks for a test to be written or changed (not "do not modify", nor
    "do not modify or delete")."""
    rest = _FORBIDS.sub(" ", task)
    return any(
        not _NEGATED.search(rest[max(0, m.start() - 12) : m.start()]) for m in _ASKS.finditer(rest)
    )


@dataclass(frozen=True)
class KeptTests:
    """The tests a task keeps as they are: every test file, or those under `paths`."""

    why: str
    paths: tuple[str, ...] = ()
    """Workspace-relative files and folders the test command names; () is all."""
    new_files: bool = True
    """A Python test file not there before is kept from being made too; False where the
    task asks for a test as well ("Add a test for x; do not modify the existing tests")."""

    def keeps(self, rel: str, *, new: bool = False) -> bool:
        """Whether `rel` is one of them; `new`: it was not there when the agent started.
        A test run's own new output (a report under tests/) is not kept."""
        if os.path.basename(rel) in TEST_SUPPORT:
            return True  # wherever it is: a conftest.py above a named test steers it too
        if new and os.path.basename(rel) in NEW_SETTINGS:
            return True  # a new pyproject.toml or setup.cfg can hold pytest's settings
        if not is_test_file(rel) or (new and not (self.new_files and rel.endswith(".py"))):
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
    command = named_command(task, runners)
    if forbids_test_changes(task):
        why = "the task says not to modify the tests"
        return KeptTests(why, new_files=not asks_for_test_changes(task))
    if command is None or not by_command or asks_for_test_changes(task):
        return None
    words = status_command(command) or []
    paths = tuple(p for word in words[1:] if (p := _in_workspace(workspace, word)) is not None)
    return KeptTests(f"the task's test command `{command}` runs them", paths)


def kept_files(kept: KeptTests, workspace: Path, limit: int = MAX_READ_ONLY) -> tuple[str, ...]:
    """The kept tests that are in the workspace now, as workspace-relative paths of plain
    files (never a link: a mount would follow it), at most `limit`. Hidden folders,
    virtual environments and package folders are not looked in."""
    root = os.path.realpath(workspace)
    found: dict[str, None] = {}
    for start in (*_supports_above(root, kept.paths), *(kept.paths or (".",))):
        for rel in _files_under(root, start):
            if len(found) >= limit:
                return tuple(found)
            if kept.keeps(rel) and _sayable(rel):
                found.setdefault(rel)
    return tuple(found)


def _supports_above(root: str, paths: Iterable[str]) -> list[str]:
    """The conftest.py and pytest configuration in each folder from the workspace down to
    each named path: they steer those tests as much as the tests' own."""
    folders = {"."}
    for path in paths:
        parts = os.path.normpath(path).split(os.sep)
        folders.update(os.path.join(*parts[:n]) for n in range(1, len(parts)))
    return [
        os.path.normpath(os.path.join(folder, name))
        for folder in sorted(folders)
        for name in sorted(TEST_SUPPORT)
        if os.path.isfile(os.path.join(root, folder, name))
    ]


def _sayable(rel: str) -> bool:
    """Whether a path can be named to Docker: a name that is not UTF-8 cannot."""
    try:
        rel.encode()
    except UnicodeEncodeError:
        return False
    return True


def _files_under(root: str, start: str) -> Iterable[str]:
    """Plain files at or under `start`, never through a link, shallowest folders first."""
    path = os.path.join(root, start)
    if os.path.isfile(path) and not os.path.islink(path):
        yield os.path.normpath(start)
        return
    folders = [start] if os.path.isdir(path) and not os.path.islink(path) else []
    while folders:
        rel = folders.pop(0)
        try:
            with os.scandir(os.path.join(root, rel)) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError:
            continue
        if any(e.name == "pyvenv.cfg" for e in entries):
            continue  # a virtual environment
        for entry in entries:
            child = os.path.normpath(os.path.join(rel, entry.name))
            if entry.is_file(follow_symlinks=False):
                yield child
            elif entry.is_dir(follow_symlinks=False) and not (
                entry.name.startswith(".") or entry.name in NOT_THE_PROJECTS
            ):
                folders.append(child)


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
        tree = python_source.parse(data or b"")
    except (ToolError, OSError, SyntaxError, ValueError):
        return []
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return found
