"""What a call changed of the tests its task keeps, put back right after it.

In a container the kept tests are read-only mounts (task_rules.kept_files). A shell on the
host, a folder renamed above a mount, a suite larger than the mounts, or a test file made
where the task keeps every test gets past them. The change tracker sees what each call
changed, from snapshots rather than the command's words. What it changed of the kept tests
is put back as it was before the call, through `undo` (under no link, nothing else
touched). The model reads so in its result, and the log has a `boundary` line.

After every call the kept tests' compiled copies in `__pycache__` go too: pytest runs one
whose header matches the source instead of the source.

The call then counts as an edit for the verification gate (`Facts.tests_put_back`): a test
run in the same command, made against the changed tests, verifies nothing. What cannot
be put back (`Facts.tests_changed`) leaves the run unverified.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path

from workers.changes.change_sets import Change
from workers.changes.snapshots import Entry
from workers.changes.tracker import ChangeTracker
from workers.changes.tree_writes import CannotWrite, state, state_of, write_entries
from workers.changes.undo import CannotUndo, undo
from workers.facts import Facts
from workers.guards.editing import EditGuard
from workers.guards.task_rules import (
    NEW_SETTINGS,
    NOT_THE_PROJECTS,
    TEST_SUPPORT,
    KeptTests,
    code_under_test,
)
from workers.log.events import Emitter
from workers.log.schema import Boundary
from workers.tools.base import ToolResult

PUT_BACK = (
    "gaffer put {paths} back as {was} before this call: the task's tests stay as they are "
    "in this run ({why}). Change {code} instead."
)
NOT_PUT_BACK = (
    "This call changed {paths}, which the task keeps as {was} ({why}), and gaffer could not "
    "put {them} back: {error}. The tests cannot verify this run."
)


@dataclass(frozen=True)
class Held:
    """What a call changed of the kept tests, and what became of it."""

    put_back: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    """Changed and not put back."""
    line: str = ""
    """What the model is told; "" when the call changed none of them."""

    def joined(self, other: Held) -> Held:
        return Held(
            self.put_back + other.put_back,
            self.changed + other.changed,
            "\n".join(line for line in (self.line, other.line) if line),
        )

    def told(self, result: ToolResult, facts: Facts) -> ToolResult:
        """The call's result with `facts`, and with what was held said and recorded."""
        if not self.line:
            return dataclasses.replace(result, facts=facts)
        return dataclasses.replace(
            result,
            output=f"{result.output.rstrip()}\n\n{self.line}".lstrip(),
            is_error=True,
            facts=dataclasses.replace(
                facts, tests_put_back=self.put_back, tests_changed=self.changed
            ),
        )


def hold(
    tracker: ChangeTracker, edits: EditGuard | None, changed: list[Change], events: Emitter
) -> tuple[list[Change], Held]:
    """The call's changes less those put back, and what was held, with a `boundary`
    line in the log when there was any."""
    if edits is None or edits.kept is None:
        return changed, Held()
    kept = edits.kept
    _drop_test_caches(tracker, kept)
    hidden = _ignored_steering(tracker, kept, events)
    rest, held = _tracked(tracker, edits, kept, changed, events)
    return rest, held.joined(hidden)


def _tracked(
    tracker: ChangeTracker,
    edits: EditGuard,
    kept: KeptTests,
    changed: list[Change],
    events: Emitter,
) -> tuple[list[Change], Held]:
    """What the call changed of the kept tests that snapshots see, put back."""
    theirs = [c for c in changed if _touches(kept, c, tracker)]
    if not theirs:
        return changed, Held()
    paths = tuple(dict.fromkeys(p for c in theirs for p in (c.old_path, c.path) if p))
    named = ", ".join(paths)
    was = "it was" if len(paths) == 1 else "they were"
    try:
        undo(tracker.store, theirs)
        error = _not_as_before(tracker, theirs)
    except CannotUndo as refused:
        error = str(refused)
        tracker.look()  # what is there now is the next call's starting point
    if error:
        them = "it" if len(paths) == 1 else "them"
        line = NOT_PUT_BACK.format(paths=named, was=was, why=kept.why, them=them, error=error)
        events.emit(_boundary("not_put_back", paths, line))
        return changed, Held(changed=paths, line=line)
    code = code_under_test(Path(tracker.store.workspace), paths[0], edits.seen)
    line = PUT_BACK.format(paths=named, was=was, why=kept.why, code=code or "the code they test")
    events.emit(_boundary("put_back", paths, line))
    return [c for c in changed if c not in theirs], Held(put_back=paths, line=line)


def _not_as_before(tracker: ChangeTracker, put_back: list[Change]) -> str:
    """Why the files are not as they were before the call, read again once put back (a
    process left running could change them again at once); "" when they are. What is
    there is the next call's starting point either way."""
    expected: dict[str, Entry | None] = {}
    for change in put_back:
        expected[change.path] = change.before if change.old_path is None else None
        if change.old_path is not None:
            expected[change.old_path] = change.before
    now = tracker.look()
    if moved := [p for p, e in expected.items() if state(now, p) != state_of(e)]:
        return f"{', '.join(moved)} changed again as gaffer put it back"
    return ""


def _ignored_steering(tracker: ChangeTracker, kept: KeptTests, events: Emitter) -> Held:
    """A conftest.py, pytest.ini or new pyproject.toml where git ignores it (`scratch/` in
    .gitignore), which snapshots leave out: a new one is removed; one there before and
    changed cannot be put back (its content was not kept), and the run is unverifiable."""
    found = [
        c
        for c in tracker.ignored_since_start()
        if _steering_file(c.path, new=c.kind == "added")
        and (c.path, c.size, c.mtime_ns) not in tracker.held_ignored
    ]
    if not found:
        return Held()
    tracker.held_ignored.update((c.path, c.size, c.mtime_ns) for c in found)
    added = [c.path for c in found if c.kind == "added"]
    error = ""
    try:
        if added:
            write_entries(tracker.store, added, {})
    except CannotWrite as refused:
        error = str(refused)
    left = tuple(c.path for c in found if c.kind != "added" or error)
    named = ", ".join(c.path for c in found)
    if left:
        why = error or "their earlier content was not kept"
        line = NOT_PUT_BACK.format(
            paths=named, was="they were", why=kept.why, them="them", error=why
        )
        events.emit(_boundary("not_put_back", left, line))
        return Held(changed=left, line=line)
    line = (
        f"gaffer removed {named}, made where git ignores it: the task's tests stay as they "
        f"are in this run ({kept.why})."
    )
    events.emit(_boundary("put_back", tuple(added), line))
    return Held(put_back=tuple(added), line=line)


def _steering_file(path: str, *, new: bool) -> bool:
    """A file that steers a test run (task_rules.TEST_SUPPORT, or a `new` pyproject.toml),
    in the project's own folders, not a virtual environment's or a package's."""
    *folders, name = path.split("/")
    if any(f.startswith(".") or f in NOT_THE_PROJECTS for f in folders):
        return False
    return name in TEST_SUPPORT or (new and name in NEW_SETTINGS)


def _drop_test_caches(tracker: ChangeTracker, kept: KeptTests) -> None:
    """Remove the compiled copies beside the kept tests (`__pycache__/test_x.*.pyc`):
    pytest runs a cached copy whose header matches the source instead of the source, and
    a command can write one that passes every test. Snapshots leave `__pycache__` out, so
    none is seen as a change; each call's end is when any goes. A cache is only a cache:
    the next run compiles the tests again."""
    workspace = tracker.store.workspace
    stems: dict[str, set[str]] = {}
    for path in tracker.started_with():
        if kept.keeps(path) and path.endswith(".py"):
            folder, name = posixpath.split(path)
            stems.setdefault(folder, set()).add(name[:-3])
    stale = []
    for folder, names in stems.items():
        cache = posixpath.join(folder, "__pycache__") if folder else "__pycache__"
        full = os.path.join(workspace, cache)
        if os.path.islink(full) or not os.path.isdir(full):
            continue
        with contextlib.suppress(OSError), os.scandir(full) as entries:
            stale += [
                posixpath.join(cache, e.name)
                for e in entries
                if e.name.endswith(".pyc") and e.name.split(".", 1)[0] in names
            ]
    if stale:
        with contextlib.suppress(CannotWrite):
            write_entries(tracker.store, stale, {})


def _boundary(action: str, paths: tuple[str, ...], line: str) -> Boundary:
    return Boundary(
        action=action, what="kept tests", paths=list(paths), count=len(paths), message=line
    )


def _touches(kept: KeptTests, change: Change, tracker: ChangeTracker) -> bool:
    """Whether a change is to a kept test: one there at the start (or moved away), or a
    new one where the task keeps new test files too."""
    if change.old_path is not None and kept.keeps(
        change.old_path, new=not tracker.had(change.old_path)
    ):
        return True
    return kept.keeps(change.path, new=not tracker.had(change.path))
