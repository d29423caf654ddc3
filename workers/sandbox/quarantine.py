"""Taking what a container planted out of the workspace: moved into the workspace's state
folder's `quarantine/` (workers/state.py), kept rather than deleted, never run, and
reached through folder handles that never follow a link."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from workers import state
from workers.changes.tree_writes import open_folder
from workers.sandbox import SandboxFault, SandboxUnavailable

# What is copied to the state folder when it is on another file system; past this a
# path stays in the workspace and the run says so (a planted sparse file could fill the
# disk).
MAX_KEPT_COPY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Quarantined:
    path: str
    """Where it was planted, relative to the workspace."""
    moved_to: str
    """Where it is now: a folder in the workspace's state folder, outside the workspace."""
    why: str = "the host would run it on its own"
    """Why it may not stay in the workspace."""


def quarantine(workspace: Path, planted: dict[str, str], label: str) -> list[Quarantined]:
    """Move each planted path (workspace-relative, with why) out of the workspace, into
    the state folder's quarantine, links as links; kept, never run. Shallowest first:
    what lies under a path already taken goes with it."""
    root = os.path.realpath(workspace)
    try:
        aside = state.workspace_dir(workspace, state.QUARANTINE, label)
    except OSError as error:
        raise SandboxUnavailable(f"cannot move planted files aside: {error}") from error
    moved: list[Quarantined] = []
    stuck: list[str] = []
    taken: list[str] = []
    for rel in sorted(dict.fromkeys(planted), key=lambda p: (p.count("/"), p)):
        if any(rel.startswith(done + "/") for done in taken):
            continue  # inside something already moved aside
        try:
            target = _free(aside / rel)
            moved.append(Quarantined(rel, _move_out(root, rel, target), planted[rel]))
            taken.append(rel)
        except FileNotFoundError:
            continue  # gone since it was found
        except OSError as error:
            stuck.append(f"{rel} ({error.strerror or error})")
    if stuck:  # the rest were moved; these still stand, and the run says so
        raise SandboxFault(f"could not take out what the container planted: {', '.join(stuck)}")
    return moved


def _free(target: Path) -> Path:
    """`target`, or a fresh name beside it when one is there already; its folder made."""
    target.parent.mkdir(parents=True, exist_ok=True)
    while os.path.lexists(target):
        target = target.with_name(f"{target.name}.{secrets.token_hex(3)}")
    return target


def _move_out(root: str, rel: str, target: Path) -> str:
    """Move one planted path out, reached through folder handles that never follow a
    link (a folder swapped for one never leads the move out of the workspace): renamed
    (its folder made writable first when a container made it read-only). Across file
    systems a plain file is copied through its own handle, when small, and removed; a
    folder is removed, not kept, through handles too. Where it is kept, or why not."""
    parts = rel.split("/")
    parent = open_folder(Path(root), parts[:-1], create=False)
    try:
        try:
            os.rename(parts[-1], target, src_dir_fd=parent)
            return str(target)
        except PermissionError:
            _writable_fd(parent)
            _writable_folder(parent, parts[-1])
            try:
                os.rename(parts[-1], target, src_dir_fd=parent)
                return str(target)
            except OSError as error:
                if error.errno != errno.EXDEV:
                    raise
        except OSError as error:
            if error.errno != errno.EXDEV:
                raise
        return _take_across(parent, parts[-1], target)
    finally:
        os.close(parent)


def _take_across(parent: int, name: str, target: Path) -> str:
    """The state folder is on another file system: a plain file or a folder is copied
    there, never following a link, then removed; what is too large to keep (a planted
    sparse file could fill the disk) stays in the workspace, OSError saying so, and the
    run says it could not be taken out. Nothing is removed without its copy."""
    info = os.lstat(name, dir_fd=parent)
    if stat.S_ISDIR(info.st_mode):
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
        try:
            source = f"/proc/self/fd/{fd}"
            if _tree_bytes(source) > MAX_KEPT_COPY_BYTES:
                raise OSError(errno.EFBIG, "too large to keep on the state folder's disk")
            shutil.copytree(source, target, symlinks=True, copy_function=_copy_plain)
        finally:
            os.close(fd)
        shutil.rmtree(name, dir_fd=parent)
        return str(target)
    if stat.S_ISREG(info.st_mode):
        if info.st_size > MAX_KEPT_COPY_BYTES:
            raise OSError(errno.EFBIG, "too large to keep on the state folder's disk")
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
        try:
            data = os.read(fd, MAX_KEPT_COPY_BYTES + 1)
        finally:
            os.close(fd)
        state.write_file(target.parent, target.name, data)
    elif stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(name, dir_fd=parent), target)
    os.unlink(name, dir_fd=parent)  # a FIFO or socket holds nothing to keep
    return str(target)


def _copy_plain(source: str, target: str) -> None:
    """A plain file copied; a FIFO or socket holds nothing, and opening one would block."""
    if stat.S_ISREG(os.lstat(source).st_mode):
        shutil.copy2(source, target, follow_symlinks=False)


def _tree_bytes(folder: str) -> int:
    total = 0
    for path, _, files in os.walk(folder):
        for file in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(path, file)).st_size
        if total > MAX_KEPT_COPY_BYTES:
            break
    return total


def _writable_folder(parent: int, name: str) -> None:
    """A folder of the container's own made writable, to be moved: through its handle,
    or, when its mode shuts even that out (`chmod 100`), by name in `parent` once lstat
    shows a folder (chmod follows a link; nothing in the container runs any more)."""
    with contextlib.suppress(OSError):
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
        inner = os.open(name, flags, dir_fd=parent)
        _writable_fd(inner)
        os.close(inner)
        return
    with contextlib.suppress(OSError):
        info = os.lstat(name, dir_fd=parent)
        if stat.S_ISDIR(info.st_mode):
            os.chmod(name, stat.S_IMODE(info.st_mode) | stat.S_IRWXU, dir_fd=parent)


def _writable_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        mode = os.fstat(fd).st_mode
        os.fchmod(fd, stat.S_IMODE(mode) | stat.S_IRWXU)
