"""Bringing an isolated editor's change set into the workspace: all of it, or nothing.

Each file the editor changed is seen three ways: as its copy started (base), as the
editor left it (theirs), and as the workspace holds it now (ours, with what other
editors brought in since). Untouched since: the editor's version goes in. Changed the
same way both times: nothing to do. Both changed a text file: `git merge-file` joins
changes to different lines. Anything else is a conflict, reported with its hunks, and
then nothing at all is written. The caller holds the editor lock throughout.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from workers import host_programs
from workers.changes.change_sets import Change, compare
from workers.changes.snapshots import LINK_MODE, Entry, Store, Tree
from workers.changes.tree_writes import CannotWrite, check_path, state, state_of, write_entries
from workers.tools.git_paths import git_env, looks_like_git_dir
from workers.tools.workspace import host_controlled

MERGE_TIMEOUT_S = 60
# A conflict's hunks, as the supervisor reads them: enough to resolve, never a flood.
MAX_HUNK_LINES = 40
MAX_HUNKS_CHARS = 4000


@dataclass(frozen=True)
class Conflict:
    path: str
    why: str
    hunks: str = ""
    """The conflicting regions, the workspace's and the editor's side by side as git
    marks them; empty when the whole file conflicts."""

    def as_json(self) -> dict[str, str]:
        return {"path": self.path, "why": self.why, "hunks": self.hunks}


@dataclass(frozen=True)
class Merged:
    applied: list[Change] = field(default_factory=list)
    """What changed in the workspace (its before is the workspace's, not the copy's)."""
    conflicts: list[Conflict] = field(default_factory=list)
    before: str | None = None
    after: str | None = None
    """The workspace's snapshots around the write; None when nothing was written."""
    skipped: str | None = None
    """Why it was never tried (the worker was cancelled)."""

    @property
    def status(self) -> str:
        if self.skipped is not None:
            return "skipped"
        if self.conflicts:
            return "conflict"
        return "applied" if self.applied else "nothing"


def merge_change_set(store: Store, base: Tree, changes: list[Change]) -> Merged:
    """Write `changes` (made on a copy of `base`) into `store`'s workspace, joined with
    what changed there since; a Merged with conflicts and nothing written when that
    cannot be done cleanly."""
    sides: dict[str, tuple[Entry | None, Entry | None]] = {}  # path: (base, theirs)
    for change in changes:
        if change.old_path is not None:
            sides[change.old_path] = (change.before, None)
            sides[change.path] = (base.get(change.path), change.after)
        else:
            sides[change.path] = (change.before, change.after)
    workspace = store.workspace
    controlled = host_controlled(workspace)
    conflicts: list[Conflict] = []
    for path in sorted(sides):
        try:
            check_path(workspace, path, controlled)
        except CannotWrite as error:
            conflicts.append(Conflict(path, f"refused: {error}"))
    if conflicts:
        return Merged(conflicts=conflicts)
    before_id, now = store.snapshot()
    writes: dict[str, Entry] = {}
    touched: list[str] = []
    for path, (was, theirs) in sorted(sides.items()):
        ours = now.get(path)
        if state_of(ours) == state_of(theirs):
            continue  # the same change is already there
        if theirs is not None and not theirs.kept:
            conflicts.append(Conflict(path, "too large to carry back (over 16 MB)"))
            continue
        if state_of(ours) == state_of(was):
            result = theirs
        else:
            result, conflict = _three_way(store, path, was, ours, theirs)
            if conflict is not None:
                conflicts.append(conflict)
                continue
        touched.append(path)
        if result is not None:
            writes[path] = result
    removals = [p for p in touched if p not in writes and state(now, p) is not None]
    conflicts += _repositories_made(workspace, writes) + _clashes(workspace, now, writes, removals)
    if conflicts:
        return Merged(conflicts=conflicts)
    if not touched:
        return Merged()
    try:  # a file in place is replaced (os.replace), never removed first
        write_entries(store, removals, writes)
    except CannotWrite as error:  # what did land stays recorded, so it can be undone
        after_id, after = store.snapshot()
        return Merged(
            applied=compare(now, after),
            conflicts=[Conflict(path, f"not written: {error}") for path in touched],
            before=before_id,
            after=after_id,
        )
    after_id, after = store.snapshot()
    return Merged(applied=compare(now, after), before=before_id, after=after_id)


def _clashes(
    workspace: Path, now: Tree, writes: dict[str, Entry], removals: list[str]
) -> list[Conflict]:
    """Writes that would fail half way: a folder where a file goes, or a file (not being
    removed) where a folder is needed; found before anything is written."""
    found = []
    for path in writes:
        if os.path.isdir(workspace / path) and not os.path.islink(workspace / path):
            found.append(Conflict(path, "a folder stands where its file goes"))
        parts = path.split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder in now and folder not in removals:
                found.append(Conflict(path, f"{folder} is a file where a folder is needed"))
    return found


def _repositories_made(workspace: Path, writes: dict[str, Entry]) -> list[Conflict]:
    """A folder the writes would make one git takes for a repository (HEAD, objects and
    refs in it): the user's own git would run its config. Refused whole."""
    children: dict[str, set[str]] = {}
    for path in writes:
        parts = path.split("/")
        for depth in range(len(parts)):
            children.setdefault("/".join(parts[:depth]), set()).add(parts[depth])
    found = []
    for folder, names in sorted(children.items()):
        with contextlib.suppress(OSError):
            names = names | set(os.listdir(workspace / folder))
        if looks_like_git_dir(names):
            found.append(Conflict(folder or ".", "refused: it would become a git repository"))
    return found


def _three_way(
    store: Store, path: str, was: Entry | None, ours: Entry | None, theirs: Entry | None
) -> tuple[Entry | None, Conflict | None]:
    """Both sides changed `path`: the two joined, or the conflict."""
    if was is None or ours is None or theirs is None:
        what = "added" if was is None else "deleted"
        return None, Conflict(path, f"both sides changed it, and one {what} it")
    texts = [_text(store, entry) for entry in (ours, was, theirs)]
    if any(text is None for text in texts):
        return None, Conflict(path, "both sides changed it, and it is not a text file")
    merged, clean = _merge_file(*(t for t in texts if t is not None))
    if merged is None:
        return None, Conflict(path, "both sides changed it, and git could not merge it")
    if not clean:
        return None, Conflict(path, "both sides changed the same lines", _hunks(merged))
    digest = store.keep(merged)
    return Entry(digest, theirs.mode, len(merged), True), None


def _text(store: Store, entry: Entry) -> bytes | None:
    if entry.mode == LINK_MODE or not entry.kept:
        return None
    try:
        data = store.read(entry.digest)
    except KeyError:
        return None
    return None if b"\0" in data else data


def _merge_file(ours: bytes, base: bytes, theirs: bytes) -> tuple[bytes | None, bool]:
    """git merge-file's result and whether it is clean; (None, False) when git failed.
    Run in a folder of its own, outside any repository, so no repository's config is read."""
    with tempfile.TemporaryDirectory(prefix="gaffer-merge-") as folder:
        for name, data in (("workspace", ours), ("base", base), ("worker", theirs)):
            with open(os.path.join(folder, name), "wb") as file:
                file.write(data)
        env = git_env(host_programs.environment(values={"HOME": folder}))
        env["GIT_CEILING_DIRECTORIES"] = os.path.dirname(folder)
        try:
            done = host_programs.run(
                ["git", "merge-file", "-p", "workspace", "base", "worker"],
                cwd=folder,
                env=env,
                timeout=MERGE_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None, False
    if done.returncode < 0 or done.returncode > 127:
        return None, False
    return done.stdout, done.returncode == 0


def _hunks(merged: bytes) -> str:
    """The conflicting regions of git's merged text, each cut to MAX_HUNK_LINES."""
    blocks: list[list[str]] = []
    inside = False
    for line in merged.decode("utf-8", "replace").splitlines():
        if line.startswith("<<<<<<< "):
            inside = True
            blocks.append([])
        if inside:
            blocks[-1].append(line)
        if line.startswith(">>>>>>> "):
            inside = False
    shown = []
    for block in blocks:
        if len(block) > MAX_HUNK_LINES:
            cut = len(block) - MAX_HUNK_LINES
            block = [*block[: MAX_HUNK_LINES - 1], f"[... {cut} lines cut ...]", block[-1]]
        shown.append("\n".join(block))
    text = "\n".join(shown)
    return text if len(text) <= MAX_HUNKS_CHARS else text[:MAX_HUNKS_CHARS] + "\n[... cut ...]"
