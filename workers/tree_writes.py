"""Writing a set of files into the workspace at once, from the change store: every
content staged first, so a full disk is found before anything is touched; every path
checked to lie inside the workspace, under no link, and outside what git or gaffer
would run or read on their own (the file tools' rule, `workspace.protection`).

Used by `gaffer undo` (a change set put back) and by isolated editors (a change set
brought into the workspace, workers/merging.py): in both, the paths come from data a
container or a repository could have shaped.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from workers.snapshots import LINK_MODE, Entry, Store, Tree
from workers.tools.workspace import protection


class CannotWrite(Exception):
    """Why the files cannot be written; one line, naming them."""


def write_entries(store: Store, removals: list[str], writes: dict[str, Entry]) -> None:
    """Stage every content first, then remove (deepest first), then put each in place:
    a full disk is found before anything is touched."""
    workspace = store.workspace
    staging = store.folder / f"staging-{os.getpid()}-{threading.get_ident()}"
    try:
        store.own_folder(staging.name)
        staged = {path: _stage(store, staging, n, e) for n, (path, e) in enumerate(writes.items())}
    except OSError as error:
        store.remove_folder(staging.name)
        raise CannotWrite(f"nothing written: could not stage the files ({error})") from error
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
            check_path(workspace, path, None)  # no link planted on the way since
            os.replace(temp, full)
            done.append(path)
    except OSError as error:
        raise CannotWrite(
            f"stopped part way ({error}); written so far: {', '.join(done) or 'none'}"
        ) from error
    finally:
        store.remove_folder(staging.name)


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


def check_path(workspace: Path, rel: str, controlled: list[str] | None) -> None:
    """Refuse a path outside the workspace, under a link, or (with `controlled`, from
    `host_controlled`) one that git or gaffer runs or reads (workspace.protection)."""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise CannotWrite(f"{rel!r} is not a path inside the workspace")
    if controlled is not None and (why := protection(workspace, rel, controlled)):
        raise CannotWrite(f"{rel} is not gaffer's to write: it is {why}")
    folder = str(workspace)
    for part in parts[:-1]:
        folder = os.path.join(folder, part)
        if os.path.islink(folder):
            raise CannotWrite(f"{rel} lies under a link ({os.path.relpath(folder, workspace)})")


def state(tree: Tree, path: str) -> tuple[str, int] | None:
    return state_of(tree.get(path))


def state_of(entry: Entry | None) -> tuple[str, int] | None:
    return None if entry is None else (entry.digest, entry.mode)
