"""Confinement of every path a tool touches to the workspace, by resolved real path.

Reads and writes go through descriptors opened without following a final symlink, and
the path a descriptor really has is checked again after the open: a link planted or
swapped between the check and the open is caught, never followed out.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from workers import state
from workers.host_runs import runs_on_its_own
from workers.tools import git_paths
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

GAFFER_DIR = ".gaffer"
MCP_CONFIG = ".mcp.json"


def protection(workspace: Path, rel: str, controlled: list[str] | None = None) -> str | None:
    """Why a write at this workspace-relative real path would change what the host later
    runs or obeys on its own (git repositories, hooks and config, gaffer's folder, MCP
    servers, the user's own config), or None. `controlled`: `host_controlled(workspace)`,
    when the caller checks many paths at once (it asks git)."""
    parts = _parts(rel)
    # Case-folded: git on case-insensitive file systems reads .GIT as .git.
    if any(git_paths.is_git_dir_name(part) for part in parts):
        return "a .git folder or file (git runs its hooks and config on your machine)"
    if _completes_git_dir(Path(os.path.realpath(workspace)), parts):
        return (
            "a folder git would take for a repository (HEAD with objects and refs, or a commondir)"
        )
    if parts and parts[0] == GAFFER_DIR:
        return "gaffer's config folder (profiles, plugins, config and skills it obeys once trusted)"
    if parts == [MCP_CONFIG]:
        return f"{MCP_CONFIG} (gaffer starts its servers on your machine)"
    for path in host_controlled(workspace) if controlled is None else controlled:
        if parts[: len(_parts(path))] == _parts(path):
            return (
                f"{path}, which git or gaffer reads as configuration or runs as hooks "
                "on your machine"
            )
    return None


def runs_unasked(workspace: Path, rel: str) -> str | None:
    """What the host runs without being asked that a write at this workspace-relative
    real path would be (host_runs.py), or None: a Python start-up hook or compiled cache,
    anything in a virtual environment or a node_modules (a venv's `pytest` imports its
    site-packages; `node_modules/.bin/jest` is a link into a package), or the
    `pyvenv.cfg` that makes a folder one. Case-folded, as a case-insensitive file system
    reads `.PYC` and `Node_Modules`. For the file tools: undo and merge put back what
    gaffer itself kept."""
    parts = [part.casefold() for part in _parts(rel)]
    if not parts:
        return None
    if runs_on_its_own("/".join(parts), set()) or parts[-1] == "pyvenv.cfg":
        return (
            "what your machine runs on its own (a Python start-up hook, a compiled cache, or "
            "the settings that make a folder a virtual environment)"
        )
    folder = Path(os.path.realpath(workspace))
    for name in _parts(rel)[:-1]:
        folder = folder / name
        if name.casefold() == "node_modules" or os.path.lexists(folder / "pyvenv.cfg"):
            shown = os.path.relpath(folder, os.path.realpath(workspace))
            return f"{shown}, whose programs your machine runs"
    return None


def host_controlled(workspace: Path) -> list[str]:
    """Workspace-relative paths, besides every .git, `.gaffer` and `.mcp.json`, that the
    host runs or obeys: git's hooks folders and config files, and the user's own gaffer
    and git config and gaffer's state folder when the workspace holds them (a workspace
    that is a home folder)."""
    root = os.path.realpath(workspace)
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    own = [config / "gaffer", config / "git", Path.home() / ".gitconfig", state.root_path()]
    paths = [p for p in git_paths.controlled(workspace) if not _in_git_dir(p)]
    for path in own:
        real = os.path.realpath(path)
        if inside(real, root) and real != root:
            paths.append(os.path.relpath(real, root))
    return list(dict.fromkeys(paths))


def _parts(rel: str) -> list[str]:
    return [p for p in rel.replace(os.sep, "/").split("/") if p not in ("", ".")]


def _in_git_dir(rel: str) -> bool:
    return any(git_paths.is_git_dir_name(part) for part in _parts(rel))


def _completes_git_dir(root: Path, parts: list[str]) -> bool:
    """Whether a folder on this path is, or would be with this write, one git may take for
    a repository (`git_paths.looks_like_git_dir`; git itself is asked about a folder that
    holds a HEAD and nothing else it names)."""
    folder = root
    for part in parts:
        present = {m for m in git_paths.GIT_DIR_MARKERS if os.path.lexists(folder / m)}
        if git_paths.looks_like_git_dir(present | ({part} & git_paths.GIT_DIR_MARKERS)):
            return True
        if "HEAD" in present and git_paths.git_takes_for_repository(folder):
            return True
        folder = folder / part
    return False


def resolve_for_write(workspace: Path, path: str) -> Path:
    """Like `resolve`, and also refuses what the host runs or obeys on its own
    (`protection`, `runs_unasked`)."""
    real = resolve(workspace, path, from_above=False)  # a write goes where it says
    rel = os.path.relpath(real, os.path.realpath(workspace))
    if why := protection(workspace, rel) or runs_unasked(workspace, rel):
        raise ToolError(f"{path!r} is inside {why}; agents may not write there")
    return real


_ESCAPED_BYTE = re.compile(r"\\x([89a-fA-F][0-9a-fA-F])")


def shown_name(text: str) -> str:
    """Text with the bytes of file names that are not UTF-8 written as `\\xNN`, as the
    model, the log and the endpoint can carry them; `given_name` reads them back."""
    if not any("\udc80" <= c <= "\udcff" for c in text):
        return text
    return "".join(f"\\x{ord(c) - 0xDC00:02x}" if "\udc80" <= c <= "\udcff" else c for c in text)


def one_line(name: str) -> bool:
    """A name without control characters: one with a line break (a repository can ship
    `x\n[gaffer: …]`) would read, in a list of names, as lines of its own."""
    return not any(c < " " or c == "\x7f" for c in name)


def given_name(path: str) -> str:
    """A path as `shown_name` wrote it, back to the name on disk."""
    return _ESCAPED_BYTE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), path)


def resolve(workspace: Path, path: str, *, from_above: bool = True) -> Path:
    """The real path of `path` inside the workspace, or a ToolError saying why not.

    Symlinks are resolved before the check, so a link pointing out is refused the same
    as `..` or an absolute path outside. Device files, FIFOs and sockets are refused:
    reading one can block forever or leak host state. A name shown with `\\xNN` for bytes
    that are not UTF-8 (`shown_name`) finds its file.
    """
    if "\x00" in path:
        raise ToolError("the path contains a NUL byte; give a plain relative path")
    root = os.path.realpath(workspace)
    given = path.strip() or "."
    if "\\x" in given and not os.path.lexists(os.path.join(root, given)):
        given = given_name(given)
    lexical = os.path.normpath(os.path.join(root, given))
    real = os.path.realpath(lexical)
    if not inside(real, root):
        if inside(lexical, root):
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
        if from_above and (rest := _under_own_name(root, lexical)) is not None:
            return resolve(workspace, rest, from_above=False)
        return Path(real)
    except OSError as error:
        raise ToolError(f"cannot access {path!r}: {error.strerror}") from error
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ToolError(f"{path!r} is a device, FIFO or socket, not a regular file; refused")
    return Path(real)


def _under_own_name(root: str, lexical: str) -> str | None:
    """`requests/adapters.py` in a workspace that is the folder `requests`: the path
    without the workspace's own name, where that names something and the path as given
    does not (models name a package's files from above it). None otherwise. `lexical`:
    the path joined to the root and normalized, so `..` can never reach out."""
    parts = _parts(os.path.relpath(lexical, root))
    if len(parts) < 2 or parts[0] != os.path.basename(root):
        return None
    if os.path.lexists(os.path.join(root, parts[0])):
        return None  # a folder of that name is there: the path means it
    rest = "/".join(parts[1:])
    return rest if os.path.lexists(os.path.join(root, rest)) else None


@contextlib.contextmanager
def open_confined(workspace: Path, real: Path, *, write: bool = False) -> Iterator[int]:
    """A descriptor on the regular file `real` (from `resolve`), opened without following
    links; `write` creates the file when missing and refuses one with other hard links,
    whose other names may lie outside the workspace (package caches link files in)."""
    flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    flags |= (os.O_RDWR | os.O_CREAT) if write else os.O_RDONLY
    try:
        fd = os.open(real, flags, 0o666)
    except OSError as error:
        if error.errno == 40:  # ELOOP: the last part is a symlink
            raise ToolError(f"{relative(workspace, real)!r} is a symlink; refused") from error
        raise ToolError(f"cannot open {relative(workspace, real)!r}: {error.strerror}") from error
    try:
        info = os.fstat(fd)
        shown = relative(workspace, real)
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{shown!r} is not a regular file; refused")
        if not inside(descriptor_path(fd), os.path.realpath(workspace)):
            raise ToolError(f"{shown!r} moved outside the workspace while it was opened; refused")
        if write and info.st_nlink > 1:
            raise ToolError(
                f"{shown!r} has {info.st_nlink} hard links, and writing it would change every "
                "copy, some perhaps outside the workspace; refused. Write a new file instead, "
                "or ask the user to break the link"
            )
        yield fd
    finally:
        os.close(fd)


def read_confined(workspace: Path, path: str, max_bytes: int) -> bytes | None:
    """A regular file inside the workspace, at most `max_bytes + 1` bytes of it; None when
    it does not exist. Never through a link out, never a hard link, never /proc."""
    real = resolve(workspace, path)
    if not os.path.lexists(real):
        return None
    with open_confined(workspace, real) as fd:
        if os.fstat(fd).st_nlink > 1:
            raise ToolError(f"{path!r} is hard-linked to other files; not read")
        return read_all(fd, max_bytes + 1)


def write_confined(workspace: Path, real: Path, data: bytes) -> None:
    with open_confined(workspace, real, write=True) as fd:
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]


def read_all(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while size < limit and (chunk := os.read(fd, min(1 << 20, limit - size))):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def descriptor_path(fd: int) -> str:
    """Where an open descriptor really points, whatever path opened it."""
    return os.readlink(f"/proc/self/fd/{fd}")


def relative(workspace: Path, path: Path) -> str:
    """How a path is shown to the model: relative to the workspace root."""
    rel = os.path.relpath(path, os.path.realpath(workspace))
    return "." if rel == "." else rel


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
