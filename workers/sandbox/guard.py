"""What a container may not change on the host, and what it planted there anyway.

Before a container starts, `survey` walks the workspace once. Everything the host runs
on its own later becomes a read-only mount: every `.git` (folder or file, at any depth),
git's hooks folder (core.hooksPath), `.mcp.json` and `.gaffer`. Files hard-linked to
files outside the workspace (package caches link them in) get their own copies, since a
write inside the container would otherwise change the cache for every project.

A container can still create such a thing where none existed (`git init` and a
`core.fsmonitor` in a folder without a repository). After it is removed, `sweep` moves
whatever appeared into `.gaffer/quarantine/`, kept rather than deleted, and says so.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from workers.sandbox import SandboxUnavailable
from workers.tools.base import ToolError
from workers.tools.workspace import GAFFER_DIR, MCP_CONFIG, git_hooks_dirs, own_dir

# Each protected path is one bind mount; a workspace with more nested repositories than
# this is refused rather than half protected.
MAX_PROTECTED = 256
QUARANTINE_DIR = "quarantine"


@dataclass(frozen=True)
class Survey:
    protected: tuple[str, ...]
    """Workspace-relative paths mounted read-only in the container."""
    unshared: tuple[str, ...]
    """Files that were hard-linked outside the workspace and now have their own copy
    (or, for a survey that only looks, would get one)."""
    hooks: tuple[str, ...]
    """git's hooks folders, protected when they exist, swept when they appear."""


@dataclass(frozen=True)
class Quarantined:
    path: str
    """Where it was planted, relative to the workspace."""
    moved_to: str
    """Where it is now, relative to the workspace."""


def survey(workspace: Path, *, unshare: bool = True) -> Survey:
    """The paths to protect; with `unshare`, files linked out get their own copies first."""
    root = os.path.realpath(workspace)
    hooks = tuple("/".join(parts) for parts in git_hooks_dirs(workspace))
    protected = [GAFFER_DIR] + [h for h in hooks if os.path.lexists(os.path.join(root, h))]
    if os.path.lexists(os.path.join(root, MCP_CONFIG)):
        protected.append(MCP_CONFIG)
    linked: dict[tuple[int, int], list[str]] = {}
    for rel, entry in _walk(root):
        if entry.name.lower() == ".git":
            protected.append(rel)
            continue
        if entry.is_file(follow_symlinks=False):
            info = entry.stat(follow_symlinks=False)
            if info.st_nlink > 1:
                linked.setdefault((info.st_dev, info.st_ino), []).append(rel)
    if len(protected) > MAX_PROTECTED:
        raise SandboxUnavailable(
            f"the workspace holds {len(protected)} git folders and other paths the container "
            f"must not change, more than the {MAX_PROTECTED} gaffer protects one by one; "
            "run it on a smaller folder"
        )
    unshared = []
    for paths in linked.values():
        nlink = os.lstat(os.path.join(root, paths[0])).st_nlink
        if nlink > len(paths):  # some of its names are outside the workspace
            for rel in paths:
                if unshare:
                    try:
                        _own_copy(os.path.join(root, rel))
                    except OSError as error:
                        raise SandboxUnavailable(
                            f"{rel} is hard-linked to a file outside the workspace and cannot "
                            f"be given its own copy ({error.strerror}); a container could change "
                            "the original through it, so none starts"
                        ) from error
                unshared.append(rel)
    return Survey(tuple(dict.fromkeys(protected)), tuple(sorted(unshared)), hooks)


def sweep(workspace: Path, before: Survey, label: str) -> list[Quarantined]:
    """Move aside every `.git`, `.mcp.json` or hooks folder that appeared since `survey`."""
    root = os.path.realpath(workspace)
    planted = [rel for rel, entry in _walk(root) if entry.name.lower() == ".git"]
    planted += [
        rel for rel in (MCP_CONFIG, *before.hooks) if os.path.lexists(os.path.join(root, rel))
    ]
    planted = [rel for rel in planted if rel not in before.protected]
    if not planted:
        return []
    try:
        aside = own_dir(workspace, GAFFER_DIR, QUARANTINE_DIR, label)
    except ToolError as error:
        raise SandboxUnavailable(f"cannot move planted files aside: {error}") from error
    moved = []
    for rel in planted:
        target = aside / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(os.path.join(root, rel), target)
        moved.append(Quarantined(rel, os.path.relpath(target, root)))
    return moved


def _walk(root: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Every entry under root, never following links and never entering a `.git`
    (protected whole) or gaffer's own folder (read-only in the container)."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    rel = os.path.relpath(entry.path, root)
                    yield rel, entry
                    if (
                        entry.is_dir(follow_symlinks=False)
                        and entry.name.lower() != ".git"
                        and rel != GAFFER_DIR
                    ):
                        stack.append(entry.path)
        except OSError:
            continue


def _own_copy(path: str) -> None:
    """Replace a hard-linked file with a copy of its own: same content, mode and times."""
    folder, name = os.path.split(path)
    info = os.lstat(path)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".gaffer-copy")
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
        shutil.copystat(path, temp, follow_symlinks=False)
        if os.geteuid() == 0:
            os.lchown(temp, info.st_uid, info.st_gid)
        os.replace(temp, path)
    except BaseException:
        if os.path.lexists(temp):
            os.unlink(temp)
        raise
