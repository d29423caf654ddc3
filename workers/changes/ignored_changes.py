"""What an agent changed among the files its change set leaves out: those git ignores and
the folders no tool looks into (`node_modules`, virtual environments, caches, build
output). Every byte a sandbox writes is seen, there too: these are listed in a section
of their own (the report, `gaffer diff`, the `change_set` line), one line each, and
`gaffer undo` removes the ones the agent added. Their contents are not kept (a large
`node_modules` would fill the store), so one the agent modified or deleted is named,
not put back.

A look is a walk of the workspace by `lstat` alone, never following a link and never
entering a `.git`: a 50,000-file tree takes a fraction of a second, and nothing is read.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from workers import state
from workers.changes.change_sets import quoted
from workers.changes.tree_writes import CannotWrite, check_path, open_folder
from workers.tools.git_paths import is_git_dir_name
from workers.tools.workspace import host_controlled

# A walk stops past this many files (a bound on memory); what lies beyond is not seen.
MAX_LOOKED_AT = 500_000
# A change set section longer than this is shortened to a count.
MAX_LISTED = 200

Seen = dict[str, tuple[int, int, int, int, int]]
"""Path to (size, mtime, ctime, inode, mode): ctime moves on any change and cannot be
set back from inside a container."""
Kind = Literal["added", "modified", "deleted"]


@dataclass(frozen=True)
class IgnoredChange:
    path: str
    kind: Kind
    size: int
    """The file's size now (before, for a deleted one)."""
    mtime_ns: int
    ctime_ns: int | None = None
    inode: int | None = None
    """With the size and mtime, the file's identity: ctime cannot be set back and the
    inode is the checkout's own, so a log written elsewhere cannot name a file of yours
    for undo to remove. None in logs of an older gaffer."""

    def as_json(self) -> dict[str, Any]:
        found = {"path": self.path, "change": self.kind, "size": self.size}
        found["mtime_ns"] = self.mtime_ns
        if self.ctime_ns is not None and self.inode is not None:
            found |= {"ctime_ns": self.ctime_ns, "inode": self.inode}
        return found

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IgnoredChange:
        kind = data["change"]
        if kind not in ("added", "modified", "deleted"):
            raise ValueError(f"unknown change {kind!r}")
        ctime, inode = data.get("ctime_ns"), data.get("inode")
        return cls(
            str(data["path"]),
            kind,
            int(data["size"]),
            int(data["mtime_ns"]),
            None if ctime is None else int(ctime),
            None if inode is None else int(inode),
        )

    @property
    def label(self) -> str:
        return f"{quoted('', self.path)} ({self.kind}, {self.size} bytes)"


def look(workspace: Path, listed: Iterable[str]) -> Seen:
    """Every file of the workspace not in `listed` (the change set's own tree)."""
    root = os.path.realpath(workspace)
    skip = set(listed)
    own = os.path.realpath(state.root_path())  # gaffer's own, in a workspace that is a home
    seen: Seen = {}
    stack = [""]
    while stack and len(seen) < MAX_LOOKED_AT:
        folder = stack.pop()
        with contextlib.suppress(OSError), os.scandir(os.path.join(root, folder)) as entries:
            for entry in entries:
                rel = f"{folder}/{entry.name}" if folder else entry.name
                if entry.is_dir(follow_symlinks=False):
                    if not is_git_dir_name(entry.name) and entry.path != own:
                        stack.append(rel)
                    continue
                if rel in skip:
                    continue
                with contextlib.suppress(OSError):
                    info = entry.stat(follow_symlinks=False)
                    if stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
                        seen[rel] = (
                            info.st_size,
                            info.st_mtime_ns,
                            info.st_ctime_ns,
                            info.st_ino,
                            info.st_mode,
                        )
    return seen


def compare(before: Seen, after: Seen) -> list[IgnoredChange]:
    changes = [
        IgnoredChange(
            path, "added" if path not in before else "modified", now[0], now[1], now[2], now[3]
        )
        for path, now in after.items()
        if before.get(path) != now
    ]
    changes += [
        IgnoredChange(path, "deleted", was[0], was[1], was[2], was[3])
        for path, was in before.items()
        if path not in after
    ]
    return sorted(changes, key=lambda c: c.path)


def section(changes: list[IgnoredChange]) -> str:
    """The change set's section of them, as `gaffer diff` and the diff file end."""
    if not changes:
        return ""
    lines = [f"# git-ignored and cache files changed ({len(changes)}; not kept, not shown):"]
    lines += [f"#   {c.label}" for c in changes[:MAX_LISTED]]
    if len(changes) > MAX_LISTED:
        lines.append(f"#   … and {len(changes) - MAX_LISTED} more")
    return "\n".join(lines) + "\n"


def undo_added(workspace: Path, changes: list[IgnoredChange]) -> tuple[list[str], list[str]]:
    """Remove the files the agent added that are still as it left them; (removed, left as
    they are, with why). Each is reached through folder handles opened without following
    a link, so a folder swapped for one never leads out."""
    root = Path(os.path.realpath(workspace))
    controlled = host_controlled(root)
    removed, left = [], []
    for change in changes:
        name = quoted("", change.path)
        if change.kind != "added":
            left.append(f"{name} ({change.kind}: its content was not kept)")
            continue
        parts = change.path.split("/")
        if change.path.startswith("/") or any(p in ("", ".", "..") for p in parts):
            left.append(f"{change.path!r} (not a path inside the workspace)")
            continue
        try:  # never what git or gaffer would run or read on their own
            check_path(root, change.path, controlled)
        except CannotWrite as error:
            left.append(f"{name} ({error})")
            continue
        try:
            folder = open_folder(root, parts[:-1], create=False)
        except FileNotFoundError:
            continue  # gone already
        except OSError:
            left.append(f"{name} (it now lies under a link)")
            continue
        try:
            info = os.lstat(parts[-1], dir_fd=folder)
            now = (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
            if change.ctime_ns is None or change.inode is None:
                left.append(f"{name} (an older log that does not say which file it was)")
                continue
            if now != (change.size, change.mtime_ns, change.ctime_ns, change.inode):
                left.append(f"{name} (changed since)")
                continue
            os.unlink(parts[-1], dir_fd=folder)
            removed.append(name)
        except FileNotFoundError:
            continue
        except OSError as error:  # a folder by that name now, or not ours to remove
            left.append(f"{name} ({error.strerror or error})")
        finally:
            os.close(folder)
    return removed, left
