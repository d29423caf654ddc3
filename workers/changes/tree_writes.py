"""Writing a set of files into the workspace at once, from the change store: every
content staged first, so a full disk is found before anything is touched; every path
checked to lie inside the workspace, under no link, and outside what git or gaffer
would run or read on their own (the file tools' rule, `workspace.protection`).

Used by `gaffer undo` (a change set put back) and by isolated editors (a change set
brought into the workspace, workers/changes/merging.py): in both, the paths come from data a
container or a repository could have shaped.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from workers.changes.snapshots import LINK_MODE, Entry, Store, Tree
from workers.tools.workspace import protection


class CannotWrite(Exception):
    """Why the files cannot be written; one line, naming them."""


def write_entries(store: Store, removals: list[str], writes: dict[str, Entry]) -> None:
    """Stage every content first, then remove (deepest first), then put each in place:
    a full disk is found before anything is touched. Every step goes through folder
    handles opened without following a link: a container still running can swap a folder
    for a link at any moment, and nothing here then leaves the workspace."""
    workspace = store.workspace
    for path in [*removals, *writes]:
        check_path(workspace, path, None)
    root_fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    # Staged in the workspace's own file system, so each file moves into place whole.
    name = f".gaffer-staging-{secrets.token_hex(8)}"
    staging_fd = -1
    try:
        os.mkdir(name, 0o700, dir_fd=root_fd)
        staging_fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root_fd)
        staged = {
            path: _stage(store, staging_fd, n, e) for n, (path, e) in enumerate(writes.items())
        }
    except OSError as error:
        _drop_staging(root_fd, name, staging_fd)
        raise CannotWrite(f"nothing written: could not stage the files ({error})") from error
    done: list[str] = []
    try:
        for path in sorted(removals, key=lambda p: p.count("/"), reverse=True):
            _remove(workspace, path)
        for path, temp in staged.items():
            parts = path.split("/")
            folder_fd = open_folder(workspace, parts[:-1], create=True)
            try:
                os.replace(temp, parts[-1], src_dir_fd=staging_fd, dst_dir_fd=folder_fd)
            finally:
                os.close(folder_fd)
            done.append(path)
    except OSError as error:
        raise CannotWrite(
            f"stopped part way ({error}); written so far: {', '.join(done) or 'none'}"
        ) from error
    finally:
        _drop_staging(root_fd, name, staging_fd)


def _drop_staging(root_fd: int, name: str, staging_fd: int) -> None:
    """Remove what is left staged (through its handle), then the folder, then the handles."""
    if staging_fd >= 0:
        for left in os.listdir(staging_fd):
            with contextlib.suppress(OSError):
                os.unlink(left, dir_fd=staging_fd)
        os.close(staging_fd)
    with contextlib.suppress(OSError):
        os.rmdir(name, dir_fd=root_fd)
    os.close(root_fd)


def open_folder(root: Path, parts: list[str], *, create: bool) -> int:
    """A handle on root/parts, each step opened without following a link (made first
    when `create`); OSError when one is a link or not a folder."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for part in parts:
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        finally:
            os.close(fd)
        fd = inner
    return fd


def _stage(store: Store, staging_fd: int, number: int, entry: Entry) -> str:
    temp = str(number)
    data = store.read(entry.digest)
    if entry.mode == LINK_MODE:
        os.symlink(os.fsdecode(data), temp, dir_fd=staging_fd)
    else:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(temp, flags, 0o600, dir_fd=staging_fd)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            os.fchmod(file.fileno(), stat.S_IMODE(0o755 if entry.mode == 0o100755 else 0o644))
    if os.geteuid() == 0:  # root undoing in a user's checkout: the file stays the user's
        owner = os.stat(store.workspace)
        os.chown(temp, owner.st_uid, owner.st_gid, dir_fd=staging_fd, follow_symlinks=False)
    return temp


def _remove(workspace: Path, path: str) -> None:
    """Remove a file (or link), then the folders that left empty, so a file can take a
    folder's place."""
    parts = path.split("/")
    for depth in range(len(parts), 0, -1):
        try:
            folder_fd = open_folder(workspace, parts[: depth - 1], create=False)
        except FileNotFoundError:
            continue  # its folder is gone already
        try:
            if depth == len(parts):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(parts[-1], dir_fd=folder_fd)
            else:
                os.rmdir(parts[depth - 1], dir_fd=folder_fd)
        except OSError:
            if depth == len(parts):
                raise
            return  # not empty: the folders above stay too
        finally:
            os.close(folder_fd)


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
