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
from workers.sandbox import SandboxFault, SandboxUnavailable
from workers.tree_writes import open_folder

# What is copied into the quarantine when the state folder is on another file system;
# more is removed without being kept (a planted sparse file could fill the disk).
MAX_KEPT_COPY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Quarantined:
    path: str
    """Where it was planted, relative to the workspace."""
    moved_to: str
    """Where it is now: a folder in the workspace's state folder, outside the workspace."""


def quarantine(workspace: Path, planted: list[str], label: str) -> list[Quarantined]:
    """Move each planted path (workspace-relative) out of the workspace, into the state
    folder's quarantine, links as links; kept, never run."""
    root = os.path.realpath(workspace)
    try:
        aside = state.workspace_dir(workspace, state.QUARANTINE, label)
    except OSError as error:
        raise SandboxUnavailable(f"cannot move planted files aside: {error}") from error
    moved, stuck = [], []
    for rel in planted:
        if not os.path.lexists(os.path.join(root, rel)):
            continue  # inside something already moved aside
        target = aside / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            moved.append(Quarantined(rel, _move_out(root, rel, target)))
        except OSError as error:
            stuck.append(f"{rel} ({error.strerror or error})")
    if stuck:  # the rest were moved; these still stand, and the run says so
        raise SandboxFault(f"could not take out what the container planted: {', '.join(stuck)}")
    return moved


def _move_out(root: str, rel: str, target: Path) -> str:
    """Move one planted path out, reached through folder handles that never follow a
    link (a folder swapped for one never leads the move out of the workspace): renamed
    when it can be (its folder made writable first, as a container can make it read-only),
    else first renamed to a name of its own at the workspace's top, then copied from there
    links as links, without device files or FIFOs and only when small, and removed.
    Where it is kept, or why not."""
    parts = rel.split("/")
    parent = open_folder(Path(root), parts[:-1], create=False)
    try:
        _writable_fd(parent)
        with contextlib.suppress(OSError):  # a folder of its own: writable, to be moved
            inner = os.open(parts[-1], os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
            _writable_fd(inner)
            os.close(inner)
        try:
            os.rename(parts[-1], target, src_dir_fd=parent)
            return str(target)
        except OSError as error:
            if error.errno != errno.EXDEV:
                raise
        held = f".gaffer-held-{secrets.token_hex(6)}"
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.rename(parts[-1], held, src_dir_fd=parent, dst_dir_fd=top)
        finally:
            os.close(top)
    finally:
        os.close(parent)
    source = os.path.join(root, held)  # right under the top: no folder on the way to swap
    kept = str(target) if _size(source) <= MAX_KEPT_COPY_BYTES else "not kept (too large)"
    is_folder = os.path.isdir(source) and not os.path.islink(source)
    if kept == str(target):
        if is_folder:
            shutil.copytree(source, target, symlinks=True, ignore=_special_files)
        elif not _special_files(root, [held]):
            shutil.copy2(source, target, follow_symlinks=False)
    if is_folder:
        shutil.rmtree(source, onerror=_writable_and_retry)
    else:
        os.unlink(source)
    return kept


def _writable_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        mode = os.fstat(fd).st_mode
        os.fchmod(fd, stat.S_IMODE(mode) | stat.S_IRWXU)


def _writable(folder: str) -> None:
    with contextlib.suppress(OSError):
        info = os.lstat(folder)
        if stat.S_ISDIR(info.st_mode):
            os.chmod(folder, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)


def _writable_and_retry(function: object, path: str, _error: object) -> None:
    _writable(os.path.dirname(path))
    if callable(function):
        function(path)


def _special_files(folder: str, names: list[str]) -> set[str]:
    """Entries that are no file, link or folder (FIFOs, sockets, devices): never copied."""
    special = set()
    for name in names:
        with contextlib.suppress(OSError):
            mode = os.lstat(os.path.join(folder, name)).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode) or stat.S_ISDIR(mode)):
                special.add(name)
    return special


def _size(path: str) -> int:
    """Bytes under a path, as stored (a sparse file counts what it takes), links as links."""
    total = 0
    for folder, _dirs, files in os.walk(path) if os.path.isdir(path) else [("", [], [path])]:
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            if total > MAX_KEPT_COPY_BYTES:
                return total
    return total
