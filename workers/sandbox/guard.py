"""What a container may not change on the host, and what it planted there anyway.

Before a container starts, `survey` walks the workspace once. Everything the host runs
on its own later becomes a read-only mount: every repository (a `.git` folder or file at
any depth, or a folder git would take for one), git's hooks folders and the config files
it includes, `.mcp.json` and `.gaffer`. Files hard-linked to
files outside the workspace (package caches link them in) get their own copies, since a
write inside the container would otherwise change the cache for every project.

What the host runs without being asked from anywhere in the workspace, git-ignored or
not (host_runs.py: `*.pth`, `sitecustomize.py`, `*.pyc`, `node_modules/.bin`, a virtual
environment's `bin`), is fingerprinted too: the command folders that exist are read-only,
and any such file that is new or changed at the end is taken out like a planted `.git`.

A container can still create such a thing where none existed (`git init` and a
`core.fsmonitor` in a folder without a repository), or rename a folder above a mount
point and plant a new one under the old name. After it is removed, `sweep` moves every
such path that is new or not the same file as before out of the workspace, into its
state folder's `quarantine/` (workers/state.py), kept rather than deleted, and says so.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from workers.host_runs import (
    Fingerprint,
    command_folders,
    fingerprint,
    join,
    package_trees,
    runs_on_its_own,
)
from workers.processes import CLOCK_SLACK_NS
from workers.sandbox import SandboxUnavailable, landing
from workers.sandbox.quarantine import Quarantined, quarantine
from workers.tools.git_paths import git_takes_for_repository, is_git_dir_name, looks_like_git_dir
from workers.tools.workspace import GAFFER_DIR, MCP_CONFIG, host_controlled, inside

# Virtual environments and node_modules mounted read-only, one mount each.
MAX_TREES = 64
# Each protected path is one bind mount; a workspace with more nested repositories than
# this is refused rather than half protected.
MAX_PROTECTED = 256


@dataclass(frozen=True)
class Survey:
    protected: tuple[str, ...]
    """Workspace-relative paths the container may not change; checked again at the end."""
    mounts: tuple[str, ...]
    """Of those, the ones mounted read-only: real folders and files, never a symlink
    (Docker would mount what it points at)."""
    identity: dict[str, tuple[int, int]]
    """(device, inode) of each protected path: one replaced or moved (a container can
    rename a folder above a mount point) is found even where the name is the same."""
    watched: tuple[str, ...]
    """Paths that must not appear or change: git's hooks folders and config files,
    `.mcp.json`, `.gaffer`."""
    unshared: tuple[str, ...]
    """Files that were hard-linked outside the workspace and now have their own copy
    (or, for a survey that only looks, would get one)."""
    host_runs: dict[str, Fingerprint]
    """Every file the host runs on its own (host_runs.py), as it was."""
    started_ns: int | None = None
    """When it was taken: a file whose ctime is later was changed while the container
    could run (landing.py). None in an older record: nothing is judged by it."""
    executables: frozenset[str] = frozenset()
    """Files with an executable bit, as they were."""
    existing: frozenset[str] | None = None
    """Every path there was; kept in memory only (a late sweep takes everything as new)."""

    def as_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["executables"] = sorted(self.executables)
        del data["existing"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Survey:
        """A survey as `as_json` wrote it (a reaper's record); TypeError or ValueError
        when it is not one."""
        return cls(
            protected=tuple(str(p) for p in data["protected"]),
            mounts=tuple(str(p) for p in data["mounts"]),
            identity={str(k): (int(v[0]), int(v[1])) for k, v in data["identity"].items()},
            watched=tuple(str(p) for p in data["watched"]),
            unshared=tuple(str(p) for p in data["unshared"]),
            host_runs={
                str(k): cast(Fingerprint, tuple(int(n) for n in v))
                for k, v in data["host_runs"].items()
                if len(v) == 6
            },
            started_ns=int(data["started_ns"]) if data.get("started_ns") else None,
            executables=frozenset(str(p) for p in data.get("executables", ())),
        )


def survey(workspace: Path, *, unshare: bool = True) -> Survey:
    """The paths to protect; with `unshare`, files linked out get their own copies first."""
    root = os.path.realpath(workspace)
    watched = (MCP_CONFIG, GAFFER_DIR, *host_controlled(workspace))
    protected = [p for p in watched if os.path.lexists(os.path.join(root, p))]
    existing: set[str] = set()
    executables: set[str] = set()
    linked: dict[tuple[int, int], list[str]] = {}
    commands: set[str] = set()
    runs: dict[str, Fingerprint] = {}
    trees: list[str] = []
    for rel, entries in _folders(root):
        protected += _repositories(root, rel, entries)
        _note_host_runs(root, rel, entries, commands, runs)
        if rel != ".":
            trees += package_trees(rel, {e.name for e in entries})
        for entry in entries:
            existing.add(join(rel, entry.name))
            if entry.is_file(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                if info.st_mode & 0o111:
                    executables.add(join(rel, entry.name))
                if info.st_nlink > 1:
                    linked.setdefault((info.st_dev, info.st_ino), []).append(join(rel, entry.name))
    mounts = []
    for rel in dict.fromkeys(protected):
        full = os.path.join(root, rel)
        if not os.path.islink(full):
            mounts.append(rel)
        elif inside(target := os.path.realpath(full), root) and target != root:
            mounts.append(os.path.relpath(target, root))  # what the link stands for
    # The virtual environments and node_modules there are now stay as they are (a
    # replaced `jest`, a patched `_pytest`, is not lost); a monorepo's many beyond the
    # first MAX_TREES are left to the sweep.
    shallow = [t for t in trees if _shallow(t) and not _inside_any(t, trees)]
    mounts += [t for t in shallow if not os.path.islink(f"{root}/{t}")][:MAX_TREES]
    if len(mounts) > MAX_PROTECTED:
        raise SandboxUnavailable(
            f"the workspace holds {len(mounts)} git folders and other paths the container "
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
    protected = list(dict.fromkeys([*protected, *mounts]))
    # The window opens a clock tick early (CLOCK_SLACK_NS), after the own copies above,
    # whose ctime is gaffer's, not the container's.
    if unshared:
        time.sleep(CLOCK_SLACK_NS / 1e9)
    started_ns = time.time_ns() - CLOCK_SLACK_NS
    return Survey(
        protected=tuple(protected),
        mounts=tuple(dict.fromkeys(mounts)),
        identity={rel: _identity(os.path.join(root, rel)) for rel in protected},
        watched=watched,
        unshared=tuple(sorted(unshared)),
        host_runs=runs,
        started_ns=started_ns,
        executables=frozenset(executables),
        existing=frozenset(existing),
    )


def sweep(
    workspace: Path,
    before: Survey,
    label: str,
    not_after_ns: int | None = None,
    keep_built: tuple[str, ...] = (),
) -> list[Quarantined]:
    """Move aside every repository, hooks folder, git config, `.mcp.json` or `.gaffer`
    that appeared or was replaced since `survey`, and every file the host runs on its own
    that is new or changed, and whatever else the container made that may not land
    (landing.py; `keep_built`: the globs of build outputs the user's profile lets land).
    `not_after_ns`: for a late sweep (the reaper's), only what changed before then, when
    the container ended; the user's own since stays."""
    root = os.path.realpath(workspace)
    found = [
        path
        for rel, entries in _folders(root)
        for path in _repositories(root, rel, entries, markers=rel not in before.identity)
    ]
    found += [rel for rel in before.watched if os.path.lexists(os.path.join(root, rel))]
    planted = [
        rel
        for rel in dict.fromkeys(found)
        if before.identity.get(rel) != _identity(os.path.join(root, rel))
    ]
    planted += [rel for rel, now in _host_runs(root).items() if before.host_runs.get(rel) != now]
    if not_after_ns is not None:
        planted = [rel for rel in planted if _changed_at(os.path.join(root, rel)) <= not_after_ns]
    why = dict.fromkeys(planted, "the host would run it on its own")
    if before.started_ns is not None:
        unreadable: list[str] = []
        held = landing.held_back(
            root,
            _folders(root, unreadable),
            unreadable=unreadable,
            since_ns=before.started_ns,
            until_ns=not_after_ns,
            executables=before.executables,
            existing=before.existing,
            keep_built=keep_built,
        )
        # What lies under a read-only mount (a virtual environment, node_modules) the
        # container could not change: what changed there is the user's (a pip install
        # in another terminal), and its identity is checked above.
        mine = [m for m in before.mounts if before.identity.get(m) == _identity(f"{root}/{m}")]
        why.update(
            {
                rel: reason
                for rel, reason in held.items()
                if rel not in why and not any(rel == m or rel.startswith(m + "/") for m in mine)
            }
        )
    if not why:
        return []
    return quarantine(workspace, why, label)


def _changed_at(path: str) -> int:
    try:
        return os.lstat(path).st_ctime_ns
    except OSError:
        return 0


def _host_runs(root: str) -> dict[str, Fingerprint]:
    """Every file under root the host runs on its own, with its fingerprint."""
    commands: set[str] = set()
    found: dict[str, Fingerprint] = {}
    for rel, entries in _folders(root):
        _note_host_runs(root, rel, entries, commands, found)
    return found


def _note_host_runs(
    root: str,
    rel: str,
    entries: list[os.DirEntry[str]],
    commands: set[str],
    found: dict[str, Fingerprint],
) -> None:
    """Add one folder's command folders and host-run files (a folder is walked before
    what is in it, so `commands` already holds those above)."""
    commands.update(command_folders(rel, {e.name for e in entries}))
    for entry in entries:
        child = join(rel, entry.name)
        if entry.is_dir(follow_symlinks=False) or not runs_on_its_own(child, commands):
            continue
        if (seen := fingerprint(os.path.join(root, child))) is not None:
            found[child] = seen


def _inside_any(folder: str, others: list[str]) -> bool:
    return any(folder.startswith(other + "/") for other in others)


def _shallow(folder: str) -> bool:
    """A command folder of the project's own, not of a package inside node_modules: one
    read-only mount each, and a project has few."""
    return folder.split("/").count("node_modules") <= 1


def _repositories(
    root: str, folder: str, entries: list[os.DirEntry[str]], *, markers: bool = False
) -> list[str]:
    """In one folder: its `.git` entries, and the folder itself when git would take it for
    a repository whatever its name (with `markers`, the HEAD and commondir that make it one)."""
    found = [join(folder, e.name) for e in entries if is_git_dir_name(e.name)]
    names = {e.name for e in entries}
    if folder == "." or "HEAD" not in names:
        return found
    if looks_like_git_dir(names) or git_takes_for_repository(Path(root, folder)):
        if not markers:
            found.append(folder)  # one that was there is protected whole
        else:  # without its HEAD (and commondir) git takes it for no repository; the
            # rest, the project's own files perhaps, stays where it is
            found += [join(folder, name) for name in ("HEAD", "commondir") if name in names]
    return found


def _folders(
    root: str, unreadable: list[str] | None = None
) -> Iterator[tuple[str, list[os.DirEntry[str]]]]:
    """Every folder under root with its entries, never following links and never entering
    a `.git` (protected, or moved out, whole) or a workspace's `.gaffer`. A folder git takes
    for a repository by another name is entered: when it loses its HEAD, what it holds is
    an ordinary folder's, and must be as clean. `unreadable` collects the folders that
    could not be listed (a container can `chmod 100` one it made: programs still reach
    what it holds by name)."""
    stack = ["."]
    while stack:
        rel = stack.pop()
        try:
            with os.scandir(os.path.join(root, rel)) as scan:
                entries = list(scan)
        except FileNotFoundError:
            continue
        except OSError:
            if unreadable is not None:
                unreadable.append(rel)
            continue
        yield rel, entries
        for entry in entries:
            child = join(rel, entry.name)
            if (
                entry.is_dir(follow_symlinks=False)
                and not is_git_dir_name(entry.name)
                and child != GAFFER_DIR
            ):
                stack.append(child)


def _identity(path: str) -> tuple[int, int]:
    try:
        info = os.lstat(path)
    except OSError:
        return (0, 0)
    return info.st_dev, info.st_ino


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
