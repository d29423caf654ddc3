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

# What of a planted file is kept when the state folder is on another file system; more
# is removed without being kept (a planted sparse file could fill the disk).
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
    """The state folder is on another file system: keep a small plain file's bytes, read
    through a handle that follows no link and never blocks; remove the rest unkept."""
    info = os.lstat(name, dir_fd=parent)
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(name, dir_fd=parent)
        return "removed, not kept (a folder, and the state folder is on another file system)"
    kept = "removed, not kept (not a small plain file)"
    if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_KEPT_COPY_BYTES:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                data = os.read(fd, MAX_KEPT_COPY_BYTES + 1)[:MAX_KEPT_COPY_BYTES]
                state.write_file(target.parent, target.name, data)
                kept = str(target)
        finally:
            os.close(fd)
    os.unlink(name, dir_fd=parent)
    return kept


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
