"""Saved command output: a command's whole output, when it is too long to show, kept in a
file of its own outside the workspace (the workspace's state folder on the host, a
folder of the container's own in a sandbox), which read_file can page through by the
absolute path the result names, and nothing else outside the workspace."""

from __future__ import annotations

import os
import re
import secrets
import stat
import time
from pathlib import Path

from workers import state
from workers.tools.base import ToolContext, ToolError

# Where a sandbox's tool server saves outputs: a folder of the container's own,
# mounted from the host's state folder (workers/sandbox/docker.py).
CONTAINER_FOLDER = Path("/gaffer/output")
# What gaffer names a saved output: nothing else in the folder is ever opened.
_NAME = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{4,16}\.log$")


def folder(ctx: ToolContext) -> Path:
    """Where this context saves outputs: the one it was given, else the workspace's."""
    if ctx.output_dir is not None:
        return ctx.output_dir
    try:
        return state.workspace_dir(ctx.workspace, state.OUTPUT)
    except OSError as error:
        raise ToolError(f"cannot make a folder for command output: {error}") from error


def new_file(where: Path) -> tuple[Path, int]:
    """A new file for a command's output, created here and never through an existing path;
    the random part keeps planted names from blocking it."""
    for _ in range(8):
        path = where / f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}.log"
        try:
            return path, state.create_file(where, path.name)
        except FileExistsError:
            continue
        except OSError as error:
            raise ToolError(f"cannot create an output file in {where}: {error.strerror}") from error
    raise ToolError(f"cannot create an output file in {where}: every name tried was taken")


def saved_name(where: Path, path: str) -> str | None:
    """The file's name when `path` names a saved output in `where`, else None."""
    given = os.path.normpath(path.strip())
    parent, name = os.path.split(given)
    return name if parent == str(where) and _NAME.match(name) else None


def open_saved(where: Path, name: str) -> int:
    """A descriptor on one saved output, opened without following a link; ToolError when
    it is gone or not a plain file of its own (a container writes this folder)."""
    try:
        fd = os.open(where / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise ToolError(f"cannot open the saved output {name}: {error.strerror}") from error
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise ToolError(f"the saved output {name} is not a plain file; refused")
    return fd


def read_saved(where: Path, name: str, max_bytes: int) -> bytes:
    """At most `max_bytes` of one saved output."""
    fd = open_saved(where, name)
    try:
        chunks, size = [], 0
        while size < max_bytes and (chunk := os.read(fd, min(1 << 20, max_bytes - size))):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
