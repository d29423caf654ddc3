"""Files the host runs without being asked, wherever they are in the workspace, ignored by
git or not: Python's start-up hooks (`*.pth`, `sitecustomize.py`, `usercustomize.py`),
its compiled caches (`*.pyc`, which Python prefers to the source when size and time
match), and the folders of commands tools run by name (`node_modules/.bin`, a virtual
environment's `bin`). A container may not leave one new or changed (workers/sandbox/
guard.py takes it out); existing virtual environments and `node_modules` are read-only
inside, whole; and no file tool writes one (workers/tools/workspace.py: `protection`).
"""

from __future__ import annotations

import os

START_UP_FILES = frozenset({"sitecustomize.py", "usercustomize.py"})
Fingerprint = tuple[int, int, int, int, int, int]
"""(device, inode, size, mtime, ctime, mode): ctime moves on any change, and nothing in
a container can set it back."""


def command_folders(folder: str, names: set[str]) -> list[str]:
    """In one folder (workspace-relative, "." for the top): the command folders it holds."""
    found = []
    if os.path.basename(folder) == "node_modules" and ".bin" in names:
        found.append(join(folder, ".bin"))
    if "pyvenv.cfg" in names:
        found += [join(folder, d) for d in ("bin", "Scripts") if d in names]
    return found


def package_trees(folder: str, names: set[str]) -> list[str]:
    """A folder that is a virtual environment or a `node_modules`: the host runs what it
    holds (a venv's `pytest` imports its site-packages; `node_modules/.bin/jest` is a
    link into a package), so one that exists is read-only inside, whole."""
    if os.path.basename(folder) == "node_modules" or "pyvenv.cfg" in names:
        return [folder]
    return []


def runs_on_its_own(rel: str, commands: set[str]) -> bool:
    """Whether the host may run this file on its own; `commands`: the command folders."""
    name = os.path.basename(rel)
    if name.endswith((".pth", ".pyc")) or name in START_UP_FILES:
        return True
    parts = rel.split("/")
    return any("/".join(parts[:depth]) in commands for depth in range(1, len(parts)))


def fingerprint(path: str) -> Fingerprint | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (
        info.st_dev,
        info.st_ino,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
        info.st_mode,
    )


def join(folder: str, name: str) -> str:
    """A name in a workspace-relative folder ("." for the top)."""
    return name if folder == "." else f"{folder}/{name}"
