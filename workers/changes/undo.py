"""Putting a change set back: all or nothing (`undo`, for the harness's own guards), or
file by file, planned and shown first (`plan`, then `apply`, for `gaffer undo`): a file
someone else changed too is refused, one changed since has the agent's part taken out by
an exact 3-way merge or is refused, and nothing is lost.

A change set comes from a log, and a log is data a repository could have planted: every
path is checked to lie inside the workspace, under no link, and outside what git or
gaffer would run or read on their own (workers/changes/tree_writes.py).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from workers.changes.change_sets import Change, quoted
from workers.changes.ignored_changes import IgnoredChange
from workers.changes.merging import _merge_file
from workers.changes.snapshots import LINK_MODE, Entry, Store, Tree
from workers.changes.tree_writes import (
    CannotWrite,
    check_path,
    open_folder,
    state,
    state_of,
    write_entries,
)
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


# -- `gaffer undo`: per file, shown before it is done -------------------------------

Action = Literal["restore", "delete", "merge", "refuse", "skip"]
SHARED = "you changed it too during the run; not undone (gaffer diff shows the agent's part)"
OVERLAPS = "changed since the run on the agent's own lines; not undone (gaffer diff shows them)"


@dataclass(frozen=True)
class FileUndo:
    """One path as undo finds it and as it leaves it (None: no file)."""

    path: str
    found: Entry | None
    left: Entry | None


@dataclass(frozen=True)
class Step:
    """What undo does for one change: put it back, merge the reverse into a file changed
    since, or refuse it (`why`); skipped when it is already as before."""

    change: Change
    action: Action
    why: str = ""
    files: tuple[FileUndo, ...] = ()
    counts: str = ""
    """`+a -b`: lines undo adds and removes, for a text file."""

    @property
    def shown(self) -> str:
        """The line that says what undo will do."""
        if self.action == "refuse":
            return f"{quoted('', self.change.path)}: {self.why}"
        counts = f", {self.counts}" if self.counts else ""
        kept = "; your later edits kept" if self.action == "merge" else ""
        return f"{self.action} {self.change.label}{counts}{kept}"


@dataclass(frozen=True)
class Plan:
    steps: list[Step]

    @property
    def acting(self) -> list[Step]:
        return [s for s in self.steps if s.action in ("restore", "delete", "merge")]

    @property
    def refused(self) -> list[Step]:
        return [s for s in self.steps if s.action == "refuse"]


def plan(store: Store, changes: list[Change]) -> Plan:
    """What undoing `changes` would do, file by file, changing nothing. CannotUndo when
    every file is already as it was before."""
    controlled = host_controlled(store.workspace)
    now = store.scan()
    steps = [_step(store, change, now, controlled) for change in changes]
    if all(s.action == "skip" for s in steps):
        paths = sorted(p for c in changes for p in (c.path, c.old_path) if p is not None)
        raise CannotUndo("every file is already as it was before: " + ", ".join(paths))
    return Plan(steps)


def apply(store: Store, planned: Plan) -> list[FileUndo]:
    """Do what `planned` says, if every file is still as it found it (CannotUndo, nothing
    changed, otherwise); the files written or removed."""
    files = [f for step in planned.acting for f in step.files]
    write_back(store, files)
    return files


def write_back(store: Store, files: list[FileUndo]) -> None:
    """Each of `files` from as it found it to as it leaves it, if all are still as found
    (CannotUndo, nothing changed, otherwise)."""
    now = store.scan()
    if moved := sorted(f.path for f in files if state(now, f.path) != state_of(f.found)):
        raise CannotUndo("changed meanwhile, nothing written: " + ", ".join(moved))
    writes = {f.path: f.left for f in files if f.left is not None}
    try:
        write_entries(store, [f.path for f in files if f.found is not None], writes)
    except CannotWrite as error:
        raise CannotUndo(str(error)) from error


def plan_redo(store: Store, files: list[FileUndo]) -> tuple[list[FileUndo], list[str]]:
    """What taking back an undo that wrote `files` would write (each as the undo found
    it, where it is still as the undo left it), and the files refused, a line each."""
    controlled = host_controlled(store.workspace)
    now = store.scan()
    acting: list[FileUndo] = []
    refused: list[str] = []
    for file in files:
        name = quoted("", file.path)
        try:
            check_path(store.workspace, file.path, controlled)
        except CannotWrite as error:
            refused.append(f"{name}: {error}; not redone")
            continue
        if state(now, file.path) != state_of(file.left):
            refused.append(f"{name}: changed since the undo; not redone")
        elif file.found is not None and not restorable(store, file.found):
            refused.append(f"{name}: its content was not kept (too large); not redone")
        else:
            acting.append(FileUndo(file.path, file.left, file.found))
    return acting, refused


def _step(store: Store, change: Change, now: Tree, controlled: list[str] | None) -> Step:
    before: dict[str, Entry | None] = {change.path: None}  # a rename: its new path goes
    before[change.old_path or change.path] = change.before
    after: dict[str, Entry | None] = {change.old_path: None} if change.old_path else {}
    after[change.path] = change.after
    try:
        for path in before:
            check_path(store.workspace, path, controlled)
    except CannotWrite as error:
        return Step(change, "refuse", f"{error}; not undone")
    if change.shared:
        return Step(change, "refuse", SHARED)
    if all(state(now, p) == state_of(e) for p, e in before.items()):
        return Step(change, "skip")
    if any(e is not None and not restorable(store, e) for e in before.values()):
        return Step(change, "refuse", "its earlier content was not kept (too large); not undone")
    found = now.get(change.path)
    if all(state(now, p) == state_of(e) for p, e in after.items()):
        files = tuple(FileUndo(p, now.get(p), e) for p, e in before.items())
        action: Action = "delete" if change.before is None else "restore"
        return Step(change, action, files=files, counts=_counts(store, found, change.before))
    merged = _merged(store, change, found)
    if merged is None:
        return Step(change, "refuse", OVERLAPS)
    if state_of(merged) == state_of(found):  # the agent's part is out already
        return Step(change, "skip")
    files = (FileUndo(change.path, found, merged),)
    return Step(change, "merge", files=files, counts=_counts(store, found, merged))


def _merged(store: Store, change: Change, found: Entry | None) -> Entry | None:
    """The file as it is now less the agent's change, by a 3-way merge (ours: now, base:
    as the agent left it, theirs: as it was before); None unless that is clean."""
    was, then = change.before, change.after
    if change.kind != "modified" or was is None or then is None or found is None:
        return None
    texts = [_bytes(store, e) for e in (found, then, was)]
    now, base, before = texts
    if now is None or base is None or before is None:
        return None
    merged, clean = _merge_file(now, base, before)
    if merged is None or not clean:
        return None
    mode = found.mode if found.mode != then.mode else was.mode  # a mode set since stays
    return Entry(store.keep(merged), mode, len(merged), True)


def _bytes(store: Store, entry: Entry) -> bytes | None:
    """A kept text content; None for a link, a binary file or one not kept."""
    if entry.mode == LINK_MODE or not restorable(store, entry):
        return None
    data = store.read(entry.digest)
    return None if b"\0" in data[:8192] else data


def _counts(store: Store, found: Entry | None, left: Entry | None) -> str:
    """`+a -b`, the lines undo adds and removes; "" when either side is not text."""
    old = b"" if found is None else _bytes(store, found)
    new = b"" if left is None else _bytes(store, left)
    if old is None or new is None:
        return ""
    lines = difflib.unified_diff(
        old.decode("utf-8", "replace").splitlines(), new.decode("utf-8", "replace").splitlines()
    )
    marks = [line[0] for line in lines if not line.startswith(("+++", "---"))]
    return f"+{marks.count('+')} -{marks.count('-')}"


# -- git-ignored files the run moved (never deleted) ----------------------------------


def ignored_moves(changes: list[IgnoredChange]) -> dict[str, str]:
    """Ignored files "added" that are one "deleted" moved: the same inode, size and mtime
    (a rename keeps all three). New path to old; undo moves these back, never deletes them:
    the added path may be the only copy of the user's file (a moved `.env`)."""
    gone: dict[tuple[int | None, int, int], str] = {
        (c.inode, c.size, c.mtime_ns): c.path
        for c in changes
        if c.kind == "deleted" and c.inode is not None
    }
    return {
        c.path: gone[(c.inode, c.size, c.mtime_ns)]
        for c in changes
        if c.kind == "added" and (c.inode, c.size, c.mtime_ns) in gone
    }


def move_back(workspace: Path, moved: IgnoredChange, old: str) -> str:
    """Move an ignored file the run moved back where it was, through folder handles and
    never over a file; one line saying what was done, or that it was left (never deleted)."""
    new, was = quoted("", moved.path), quoted("", old)
    left = f"left: {new}, the file the run moved from {was} (git-ignored; not deleted)"
    controlled = host_controlled(workspace)
    try:
        for path in (moved.path, old):
            check_path(workspace, path, controlled)
        source = open_folder(workspace, moved.path.split("/")[:-1], create=False)
    except (CannotWrite, OSError) as error:
        return f"{left}: {error}"
    try:
        name = moved.path.split("/")[-1]
        info = os.lstat(name, dir_fd=source)
        if (info.st_ino, info.st_size, info.st_mtime_ns) != (
            moved.inode,
            moved.size,
            moved.mtime_ns,
        ):
            return f"{left}: changed since"
        target = open_folder(workspace, old.split("/")[:-1], create=True)
        try:  # a link, then the old name's removal: never over a file now at `old`
            os.link(
                name,
                old.split("/")[-1],
                src_dir_fd=source,
                dst_dir_fd=target,
                follow_symlinks=False,
            )
            os.unlink(name, dir_fd=source)
        finally:
            os.close(target)
    except OSError as error:
        return f"{left}: {error.strerror or error}"
    finally:
        os.close(source)
    return f"moved back: {new} → {was} (git-ignored; the run moved it)"
