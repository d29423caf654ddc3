"""Putting a change set back (`gaffer undo`): every file as it was before, or nothing
changed at all when that cannot be done safely.

A change set comes from a log, and a log is data a repository could have planted: every
path is checked to lie inside the workspace, under no link, and outside what git or
gaffer would run or read on their own: the same rule as the file tools' writes
(`workers/tools/workspace.protection`).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from workers.change_sets import Change
from workers.snapshots import LINK_MODE, Entry, Store, Tree
from workers.tools.workspace import host_controlled, protection


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
    if all(_state(now, p) == _state_of(e) for p, e in before.items()):
        raise CannotUndo("every file is already as it was before: " + ", ".join(sorted(before)))
    if conflicts := sorted(p for p, e in expected.items() if _state(now, p) != _state_of(e)):
        raise CannotUndo("changed since, so undoing would lose that work: " + ", ".join(conflicts))
    writes = {p: e for p, e in before.items() if e is not None}
    if unkept := sorted(p for p, e in writes.items() if not _restorable(store, e)):
        raise CannotUndo("their earlier content was not kept (too large): " + ", ".join(unkept))
    _apply(store, [p for p, e in expected.items() if e is not None], writes)
    return [change.label for change in changes]


def _apply(store: Store, removals: list[str], writes: dict[str, Entry]) -> None:
    """Stage every content first, then remove (deepest first), then put each in place:
    a full disk is found before anything is touched."""
    workspace = store.workspace
    staging = store.folder / f"undo-{os.getpid()}"
    try:
        store.own_folder(staging.name)
        staged = {path: _stage(store, staging, n, e) for n, (path, e) in enumerate(writes.items())}
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise CannotUndo(f"nothing undone: could not stage the files ({error})") from error
    done: list[str] = []
    try:
        for path in sorted(removals, key=lambda p: p.count("/"), reverse=True):
            full = os.path.join(workspace, path)
            if os.path.lexists(full):
                os.unlink(full)
            _prune_empty_folders(workspace, os.path.dirname(full))
        for path, temp in staged.items():
            full = os.path.join(workspace, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            _check(workspace, path, None)  # no link planted on the way since
            os.replace(temp, full)
            done.append(path)
    except OSError as error:
        raise CannotUndo(
            f"undo stopped part way ({error}); put back so far: {', '.join(done) or 'none'}"
        ) from error
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _stage(store: Store, staging: Path, number: int, entry: Entry) -> str:
    temp = str(staging / str(number))
    data = store.read(entry.digest)
    if entry.mode == LINK_MODE:
        os.symlink(os.fsdecode(data), temp)
    else:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.chmod(temp, stat.S_IMODE(0o755 if entry.mode == 0o100755 else 0o644))
    if os.geteuid() == 0:  # root undoing in a user's checkout: the file stays the user's
        owner = os.stat(store.workspace)
        os.lchown(temp, owner.st_uid, owner.st_gid)
    return temp


def _prune_empty_folders(workspace: Path, folder: str) -> None:
    """Remove folders a removal left empty, so a file can take a folder's place."""
    root = os.path.realpath(workspace)
    while os.path.realpath(folder) != root and folder.startswith(str(workspace)):
        try:
            os.rmdir(folder)
        except OSError:
            return
        folder = os.path.dirname(folder)


def _check(workspace: Path, rel: str, controlled: list[str] | None) -> None:
    """Refuse a path outside the workspace, under a link, or (with `controlled`, from
    `host_controlled`) one that git or gaffer runs or reads (workspace.protection)."""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise CannotUndo(f"{rel!r} is not a path inside the workspace")
    if controlled is not None and (why := protection(workspace, rel, controlled)):
        raise CannotUndo(f"{rel} is not gaffer's to write: it is {why}")
    folder = str(workspace)
    for part in parts[:-1]:
        folder = os.path.join(folder, part)
        if os.path.islink(folder):
            raise CannotUndo(f"{rel} lies under a link ({os.path.relpath(folder, workspace)})")


def _state(tree: Tree, path: str) -> tuple[str, int] | None:
    return _state_of(tree.get(path))


def _state_of(entry: Entry | None) -> tuple[str, int] | None:
    return None if entry is None else (entry.digest, entry.mode)


def _restorable(store: Store, entry: Entry) -> bool:
    if not entry.kept:
        return False
    try:
        store.read(entry.digest)
    except KeyError:
        return False
    return True
