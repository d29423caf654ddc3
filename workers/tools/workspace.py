"""Confinement of every path a tool touches to the workspace, by resolved real path."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from workers.tools.base import ToolError

# Folders no listing or search should wander into: tool noise, not project content.
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".tox",
        ".gaffer",
    }
)


# Writes here would outlive the run with more power than the agent had: git hooks run on
# the user's machine, and gaffer's own folder holds the profiles and config of the next run.
PROTECTED_DIRS = (".git", ".gaffer")


def resolve_for_write(workspace: Path, path: str) -> Path:
    """Like `resolve`, and also refuses gaffer's and git's own folders."""
    real = resolve(workspace, path)
    rel = os.path.relpath(real, os.path.realpath(workspace))
    top = rel.split(os.sep, 1)[0]
    if top in PROTECTED_DIRS:
        raise ToolError(f"{path!r} is inside {top}/, which agents may not write to")
    return real


def resolve(workspace: Path, path: str) -> Path:
    """The real path of `path` inside the workspace, or a ToolError saying why not.

    Symlinks are resolved before the check, so a link pointing out is refused the same
    as `..` or an absolute path outside. Device files, FIFOs and sockets are refused:
    reading one can block forever or leak host state.
    """
    if "\x00" in path:
        raise ToolError("the path contains a NUL byte; give a plain relative path")
    root = os.path.realpath(workspace)
    given = path.strip() or "."
    lexical = os.path.normpath(os.path.join(root, given))
    real = os.path.realpath(lexical)
    if not _inside(real, root):
        if _inside(lexical, root):
            raise ToolError(
                f"{path!r} is or passes through a symlink that points outside the workspace "
                f"(to {real}); only paths inside the workspace can be used"
            )
        raise ToolError(
            f"{path!r} is outside the workspace ({root}); use a path relative to the workspace root"
        )
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return Path(real)
    except OSError as error:
        raise ToolError(f"cannot access {path!r}: {error.strerror}") from error
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ToolError(f"{path!r} is a device, FIFO or socket, not a regular file; refused")
    return Path(real)


def relative(workspace: Path, path: Path) -> str:
    """How a path is shown to the model: relative to the workspace root."""
    rel = os.path.relpath(path, os.path.realpath(workspace))
    return "." if rel == "." else rel


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
