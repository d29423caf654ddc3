"""gaffer's own state, kept outside every workspace: run logs with their pages and diffs,
the change store, isolated editors' copies, saved command output and what a container
planted. A repository controls everything inside the workspace, links included, so
nothing gaffer writes and later trusts may live there (a workspace's `.gaffer/` is input
only: config, profiles, tools and skills, read when trusted, never written).

The state folder is `$XDG_STATE_HOME/gaffer/` (default `~/.local/state/gaffer/`), one
folder per workspace under `workspaces/`, named by the workspace's real path. Every
folder on the way is made by gaffer with mode 0700, must be a real folder (never a link)
owned by the user gaffer runs as, and is refused otherwise with one line.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
from pathlib import Path

STATE_VAR = "XDG_STATE_HOME"
# Folder names in a workspace's state: one place names them all.
LOGS, CHANGES, WORKTREES, OUTPUT, QUARANTINE = (
    "logs",
    "changes",
    "worktrees",
    "output",
    "quarantine",
)
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# Enough of the path's digest that two workspaces never share a folder; the readable
# part before it is the workspace's own name, cut short.
DIGEST_CHARS = 16
NAME_CHARS = 40


class UnsafeState(OSError):
    """A state folder that is a link, not a folder, or someone else's; one line."""


def root() -> Path:
    """`$XDG_STATE_HOME/gaffer`, made and checked (a relative XDG_STATE_HOME is ignored,
    as the XDG spec says)."""
    return _checked(_base() / "gaffer")


def root_path() -> Path:
    """Where `root` is, without making or checking anything (to protect it from writes)."""
    return _base() / "gaffer"


def _base() -> Path:
    given = os.environ.get(STATE_VAR, "")
    if given and os.path.isabs(given):
        return Path(given)
    return Path.home() / ".local" / "state"


def workspace_dir(workspace: Path, *parts: str) -> Path:
    """The state folder of one workspace (by its real path), or a folder inside it; made
    and checked on the way."""
    real = os.path.realpath(workspace)
    if (home := _copy_of(real)) is not None:
        return folder_in(home, *parts)  # an isolated editor's copy keeps its workspace's
    folder = folder_in(root(), "workspaces", _folder_name(real))
    _note_workspace(folder, real)
    return folder_in(folder, *parts)


def forget_workspace(workspace: Path) -> None:
    """Remove a workspace's whole state folder, when it has one: a workspace that is
    itself gone (a cluster node's checkout) leaves nothing behind."""
    folder = root_path() / "workspaces" / _folder_name(os.path.realpath(workspace))
    if os.path.isdir(folder) and not os.path.islink(folder):
        shutil.rmtree(folder, ignore_errors=True)


def _folder_name(real: str) -> str:
    """A workspace's folder in the state folder: its own name, cut short, and its path's digest."""
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:DIGEST_CHARS]
    name = _UNSAFE_NAME.sub("_", os.path.basename(real))[:NAME_CHARS].strip("._") or "root"
    return f"{name}-{digest}"


def _copy_of(real: str) -> Path | None:
    """The state folder of the workspace whose isolated copy (`worktrees/NAME`) `real` is."""
    workspaces = os.path.join(os.path.realpath(root_path()), "workspaces")
    rel = os.path.relpath(real, workspaces)
    parts = rel.split(os.sep)
    if rel.startswith("..") or len(parts) != 3 or parts[1] != WORKTREES:
        return None
    return folder_in(root(), "workspaces", parts[0])


def folder_in(base: Path, *parts: str) -> Path:
    """`base/parts…`, each part made (0700) when missing and checked: a real folder of
    this user's, never a link. `base` must be checked already."""
    folder = base
    for part in parts:
        if not part or "/" in part or part in (".", ".."):
            raise UnsafeState(f"not a folder name: {part!r}")
        folder = _checked(folder / part)
    return folder


def _checked(folder: Path) -> Path:
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700, parents=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeState(
            f"{folder} is a link or a file, not a folder; gaffer keeps its state only in "
            "folders it made (remove it, and gaffer makes one)"
        )
    if info.st_uid != os.geteuid():
        raise UnsafeState(
            f"{folder} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()}); "
            f"gaffer keeps its state only in your own folders (set {STATE_VAR} elsewhere)"
        )
    if info.st_mode & 0o077:
        os.chmod(folder, 0o700)  # ours: nobody else reads run logs or file contents
    return folder


def _note_workspace(folder: Path, real: str) -> None:
    """A `workspace` file naming the real path, for a person looking in the folder."""
    with contextlib.suppress(FileExistsError, OSError):
        fd = os.open(
            folder / "workspace", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600
        )
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as file:
            file.write(real + "\n")


def create_file(folder: Path, name: str, mode: int = 0o600) -> int:
    """A new file in a checked folder, opened for writing; never through an existing path
    (a link or a file already there is refused: FileExistsError)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(folder / name, flags, mode)


def write_file(folder: Path, name: str, data: bytes) -> Path:
    """Write `folder/name` whole: a new file moved over the old one, so a link or another
    file planted by that name is replaced, never written through."""
    path = folder / name
    temp = f".{name}.{os.getpid()}.{os.urandom(4).hex()}"
    fd = create_file(folder, temp)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(folder / temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(folder / temp)
        raise
    return path


def open_append(folder: Path, name: str) -> int:
    """`folder/name` opened to append, made when missing; never through a link."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(folder / name, flags, 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeState(f"{folder / name} is not a regular file; gaffer will not write to it")
    return fd


def legacy_logs(workspace: Path) -> int:
    """How many run logs an older gaffer left in `<workspace>/.gaffer/logs` (counted
    without following links; never read: a repository can ship such files)."""
    folder = os.path.join(os.path.realpath(workspace), ".gaffer", "logs")
    try:
        if any(stat.S_ISLNK(os.lstat(p).st_mode) for p in (os.path.dirname(folder), folder)):
            return 0
        with os.scandir(folder) as entries:
            return sum(
                1 for e in entries if e.name.endswith(".jsonl") and e.is_file(follow_symlinks=False)
            )
    except OSError:
        return 0


# A folder handle that is never a link: each step of a walk is opened this way.
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Write bits for others than the owner: a folder above a private root with one of these
# (and no sticky bit) lets another user rename the root away and put a link in its place.
_OTHERS_WRITE = 0o022


def private_root(folder: Path) -> Path:
    """`folder` (its real path), made 0700 when missing, as a root gaffer makes and removes
    folders under on this machine: it must be a real folder of this user's, open to nobody
    else, and no folder above it may let another user swap it. A folder of that name made
    first by someone else, left open or put there as a link is refused (UnsafeState), never
    used or changed."""
    os.makedirs(folder.parent, exist_ok=True)
    real = Path(os.path.realpath(folder.parent)) / folder.name
    for above in reversed(real.parents):
        _check_above(above)
    with contextlib.suppress(FileExistsError):
        os.mkdir(real, 0o700)
    os.close(open_private(real))
    return real


def _check_above(folder: Path) -> None:
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeState(f"{folder} is a link or a file now; gaffer will not keep folders there")
    if info.st_uid not in (0, os.geteuid()):
        raise UnsafeState(
            f"{folder} belongs to uid {info.st_uid}; gaffer keeps its folders only under "
            "folders of yours or root's"
        )
    if info.st_mode & _OTHERS_WRITE and not info.st_mode & stat.S_ISVTX:
        raise UnsafeState(
            f"{folder} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}); "
            "gaffer keeps its folders only where nobody else can swap them"
        )


def open_private(folder: Path) -> int:
    """A handle on `folder`, opened without following a link, when it is a folder of this
    user's that nobody else may enter (0700 or narrower); UnsafeState otherwise."""
    try:
        fd = os.open(folder, _FOLDER_FLAGS)
    except OSError as error:  # ELOOP: a link; ENOTDIR: a file
        raise UnsafeState(
            f"{folder} is not a folder gaffer may use ({error.strerror}); "
            "gaffer keeps its folders only in folders it made"
        ) from error
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        os.close(fd)
        raise UnsafeState(
            f"{folder} belongs to uid {info.st_uid} with mode {stat.S_IMODE(info.st_mode):o}, "
            f"not to you (uid {os.geteuid()}) alone; gaffer will not use it (remove it, "
            "and gaffer makes its own)"
        )
    return fd


def chown_tree(folder: Path, uid: int, gid: int) -> None:
    """A folder and all in it given to a user (root preparing a copy that user works in),
    walked through folder handles: a link is changed itself, never followed, and a folder
    swapped for a link during the walk is not entered."""
    fd = os.open(folder, _FOLDER_FLAGS)
    try:
        _chown_in(fd, uid, gid)
    finally:
        os.close(fd)


def _chown_in(fd: int, uid: int, gid: int) -> None:
    os.fchown(fd, uid, gid)
    with os.scandir(fd) as entries:
        listed = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    for name, is_folder in listed:
        inner = _open_folder_at(fd, name) if is_folder else None
        if inner is None:  # a file, or a link: changed itself, never followed
            os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)
            continue
        try:
            _chown_in(inner, uid, gid)
        finally:
            os.close(inner)


def _open_folder_at(fd: int, name: str) -> int | None:
    """A handle on folder `name` in `fd`; None when it is no longer a folder (a link now)."""
    try:
        return os.open(name, _FOLDER_FLAGS, dir_fd=fd)
    except OSError:
        return None
