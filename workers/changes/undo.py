"""Putting a change set back (`gaffer undo`): every file as it was before, or nothing
changed at all when that cannot be done safely.

A change set comes from a log, and a log is data a repository could have planted: every
path is checked to lie inside the workspace, under no link, and outside what git or
gaffer would run or read on their own (workers/changes/tree_writes.py).
"""

from __future__ import annotations

from pathlib import Path

from workers.changes.change_sets import Change
from workers.changes.snapshots import Entry, Store
from workers.changes.tree_writes import CannotWrite, check_path, state, state_of, write_entries
from workers.tools.workspace import host_controlled


class CannotUndo(Exception):
    """Why a change set cannot be put back; one line, naming the files."""


def undo(store: Store, changes: list[Change]) -> list[str]:
    """Put every file of `changes` back as it was before them. Refused (CannotUndo,
    nothing changed) when a file is no longer as they left it, a content to restore was
    not kept, or a path is not one undo may touch. Returns what was put back, as labels."""
    controlled = host_controlled(store.workspace)
    for change in changes:
        for path in (change.path, change.old_path):
            if path is not None:
                _check(store.workspace, path, controlled)
    now = store.scan()
    expected: dict[str, Entry | None] = {}
    for change in changes:  # what each path holds right after the change set
        if change.old_path is not None:
            expected.setdefault(change.old_path, None)
        expected[change.path] = change.after
    before: dict[str, Entry | None] = {}
    for change in changes:  # what each path held before it
        before.setdefault(change.path, None)
        before[change.old_path or change.path] = change.before
    if all(state(now, p) == state_of(e) for p, e in before.items()):
        raise CannotUndo("every file is already as it was before: " + ", ".join(sorted(before)))
    if conflicts := sorted(p for p, e in expected.items() if state(now, p) != state_of(e)):
        raise CannotUndo("changed since, so undoing would lose that work: " + ", ".join(conflicts))
    writes = {p: e for p, e in before.items() if e is not None}
    if unkept := sorted(p for p, e in writes.items() if not restorable(store, e)):
        raise CannotUndo("their earlier content was not kept (too large): " + ", ".join(unkept))
    try:
        write_entries(store, [p for p, e in expected.items() if e is not None], writes)
    except CannotWrite as error:
        raise CannotUndo(f"undo: {error}") from error
    return [change.label for change in changes]


def restorable(store: Store, entry: Entry) -> bool:
    if not entry.kept:
        return False
    try:
        store.read(entry.digest)
    except KeyError:
        return False
    return True


def _check(workspace: Path, rel: str, controlled: list[str] | None) -> None:
    try:
        check_path(workspace, rel, controlled)
    except CannotWrite as error:
        raise CannotUndo(str(error)) from error
