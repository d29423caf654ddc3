"""What an agent changed in the workspace, as the harness saw it: the difference of two
snapshots (workers/changes/snapshots.py), whatever made it. Shown as a unified diff, recorded in
the log, and put back by `gaffer undo`.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from workers import state
from workers.changes import ignored_changes
from workers.changes.ignored_changes import IgnoredChange
from workers.changes.snapshots import LINK_MODE, Entry, Store, Tree
from workers.log.events import Emitter
from workers.log.schema import ChangeSet

Kind = Literal["added", "modified", "deleted", "renamed", "mode"]


@dataclass(frozen=True)
class Change:
    path: str
    kind: Kind
    before: Entry | None
    after: Entry | None
    old_path: str | None = None
    """Where a renamed file was."""
    shared: bool = False
    """Someone else changed this file too, between the agent's calls: its `before` is not
    all the agent's, so undo will not put it back whole."""

    @property
    def label(self) -> str:
        if self.kind == "renamed":
            return f"{self.old_path} → {self.path} (renamed)"
        return f"{self.path} ({self.kind})"

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path, "change": self.kind}
        if self.old_path is not None:
            data["old_path"] = self.old_path
        if self.shared:
            data["shared"] = True
        for side in ("before", "after"):
            entry: Entry | None = getattr(self, side)
            if entry is not None:
                data[side] = {
                    "sha256": entry.digest,
                    "size": entry.size,
                    "mode": f"{entry.mode:o}",
                    "kept": entry.kept,
                }
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Change:
        def entry(side: str) -> Entry | None:
            value = data.get(side)
            if value is None:
                return None
            return Entry(
                str(value["sha256"]), int(value["mode"], 8), int(value["size"]), bool(value["kept"])
            )

        kind = data["change"]
        if kind not in ("added", "modified", "deleted", "renamed", "mode"):
            raise ValueError(f"unknown change {kind!r}")
        return cls(
            str(data["path"]),
            kind,
            entry("before"),
            entry("after"),
            data.get("old_path"),
            shared=data.get("shared") is True,
        )


def compare(before: Tree, after: Tree) -> list[Change]:
    """Every file added, deleted, modified or with a new mode, by path; a deleted file
    whose exact content reappears under a new path is one rename."""
    changes: list[Change] = []
    added = {p: e for p, e in after.items() if p not in before}
    deleted = {p: e for p, e in before.items() if p not in after}
    by_content: dict[str, list[str]] = {}
    for path, entry in sorted(deleted.items()):
        by_content.setdefault(entry.digest, []).append(path)
    for path, entry in sorted(added.items()):
        olds = by_content.get(entry.digest)
        if olds:
            gone = olds.pop(0)
            changes.append(Change(path, "renamed", deleted.pop(gone), entry, old_path=gone))
        else:
            changes.append(Change(path, "added", None, entry))
    changes.extend(Change(p, "deleted", e, None) for p, e in deleted.items())
    for path in before.keys() & after.keys():
        was, now = before[path], after[path]
        if was.digest != now.digest:
            changes.append(Change(path, "modified", was, now))
        elif was.mode != now.mode:
            changes.append(Change(path, "mode", was, now))
    return sorted(changes, key=lambda c: c.path)


def combine(steps: list[list[Change]]) -> list[Change]:
    """Change sets made one after another as one: each path from its first `before` to
    its last `after` (renames taken as a deletion and an addition). A path whose next
    step does not start where the last one ended was changed by someone else in between:
    it is marked `shared`."""
    first: dict[str, Entry | None] = {}
    last: dict[str, Entry | None] = {}
    shared: set[str] = set()
    for changes in steps:
        for change in changes:
            moves = [(change.path, change.before, change.after)]
            if change.old_path is not None:
                moves = [(change.old_path, change.before, None), (change.path, None, change.after)]
            for path, was, now in moves:
                if change.shared or (path in last and last[path] != was):
                    shared.add(path)
                first.setdefault(path, was)
                last[path] = now
    before = {p: e for p, e in first.items() if e is not None}
    after = {p: e for p, e in last.items() if e is not None}
    return [
        dataclasses.replace(c, shared=True) if {c.path, c.old_path} & shared else c
        for c in compare(before, after)
    ]


# The kernel stamps ctime from a coarse clock, up to a tick behind time.time_ns().
CLOCK_SLACK_NS = 20_000_000


def _own_output() -> set[tuple[int, int]]:
    """(device, inode) of gaffer's stdout and stderr where they are plain files."""
    found = set()
    for fd in (1, 2):
        try:
            info = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            found.add((info.st_dev, info.st_ino))
    return found


class ChangeTracker:
    """One editing agent's view of the workspace: what each of its calls changed, and
    at the end its whole change set: those calls' changes (and gaffer's own writes for
    it), never what someone else changed between them (the user in another terminal)."""

    def __init__(self, store: Store, diff_file: Path | None = None) -> None:
        self.store = store
        self.diff_file = diff_file
        """Where the change set's unified diff is written at the end (beside the log)."""
        self.before_id, self._start = store.snapshot()
        self._last = self._start
        self._in_flight = 0
        self._steps: list[list[Change]] = []
        """What each call (or gaffer's own write for the agent) changed, in order."""
        self._since_ns = time.time_ns()
        self._windows: list[tuple[int, int]] = []
        """When the agent's calls ran: an ignored file whose ctime falls in none of them
        was changed by someone else (a `2> run.log` of the user's, their own build)."""
        self._own_output = _own_output()
        self._ignored_start = ignored_changes.look(store.workspace, self._start)
        self.held_ignored: set[tuple[str, int, int]] = set()
        """Ignored files already dealt with by gaffer's rules: (path, size, mtime_ns)."""
        self.ignored: list[IgnoredChange] = []
        """What changed among the files the change set leaves out (set by `finish`)."""
        self.worktree = store.workspace.name if store.home != store.workspace else None
        """An isolated editor's copy (workers/changes/worktrees.py): its folder's name in the
        workspace's state folder."""

    def call_starts(self) -> None:
        """The workspace as a call that may change it finds it: what changed since the
        last look was not the agent's. While another call runs (a delegation that overlaps
        its batch), the agent's span goes on from where that one started."""
        self._in_flight += 1
        if self._in_flight == 1:
            self._since_ns = time.time_ns()
            self._last = self.store.scan()

    def changed_by_call(self) -> list[Change]:
        """What changed since the call started (the call just made, or workers it ran)."""
        self._in_flight = max(0, self._in_flight - 1)
        return self._step()

    def look(self) -> Tree:
        """The workspace now, taken as the last look: what changed since is the agent's
        (gaffer itself wrote or put back files for it)."""
        self._step()
        return self._last

    def _step(self) -> list[Change]:
        """What changed since the last look, the agent's: one step and one time window."""
        now = self.store.scan()
        ended = time.time_ns()
        changes = [c for c in compare(self._last, now) if not self._gaffers_output(c.path)]
        self._windows.append((self._since_ns - CLOCK_SLACK_NS, ended))
        self._since_ns, self._last = ended, now
        self._steps.append(changes)
        return changes

    def _gaffers_output(self, path: str) -> bool:
        """Whether `path` is where gaffer's own stdout or stderr goes (`2> run.log` inside
        the workspace): it grows while every call runs, and is the user's, never the agent's."""
        if not self._own_output:
            return False
        try:
            info = os.lstat(self.store.workspace / path)
        except OSError:
            return False
        return (info.st_dev, info.st_ino) in self._own_output

    def _agents(self, changes: list[IgnoredChange]) -> list[IgnoredChange]:
        """Of the ignored files changed since the start, those the agent's calls changed:
        their ctime (set by the kernel on every change) falls in one of its windows."""
        inodes = {inode for _, inode in self._own_output}
        return [
            c
            for c in changes
            if c.inode not in inodes
            and (
                c.kind == "deleted"  # no time to judge by: named, never put back
                or c.ctime_ns is None
                or any(start <= c.ctime_ns <= end for start, end in self._windows)
            )
        ]

    def since_start(self) -> list[Change]:
        """Everything the agent changed since it started, as the workspace is now."""
        self.look()
        return combine(self._steps)

    def had(self, path: str) -> bool:
        """Whether `path` was there when the agent started."""
        return path in self._start

    def started_with(self) -> Iterable[str]:
        """Every path there was when the agent started."""
        return self._start.keys()

    def ignored_since_start(self) -> list[IgnoredChange]:
        """What changed since the start among the files snapshots leave out (what git
        ignores, caches): a walk by lstat alone, a fraction of a second for 50,000 files."""
        looked = ignored_changes.look(self.store.workspace, self._last)
        return self._agents(ignored_changes.compare(self._ignored_start, looked))

    def original(self, path: str) -> bytes | None:
        """A file as it was when the agent started; None when it was not there, or its
        content was not kept (too large) or is gone from the store."""
        entry = self._start.get(path)
        if entry is None or not entry.kept or entry.mode == LINK_MODE:
            return None
        try:
            return self.store.read(entry.digest)
        except KeyError:
            return None

    def finish(self) -> tuple[str, list[Change]]:
        """The snapshot id at the end and everything changed since the start."""
        after_id, now = self.store.snapshot()
        self._last = now
        looked = ignored_changes.look(self.store.workspace, now)
        cut = ignored_changes.MAX_LOOKED_AT in (len(looked), len(self._ignored_start))
        # A look cut short would call the user's own files, beyond the first cut, added.
        self.ignored = (
            [] if cut else self._agents(ignored_changes.compare(self._ignored_start, looked))
        )
        return after_id, combine(self._steps)


def record_change_set(tracker: ChangeTracker, events: Emitter) -> list[Change] | None:
    """An agent's whole change set, its diff written beside the log and a `change_set`
    line in it; None when the workspace could not be read (the line says nothing then)."""
    try:
        after_id, changes = tracker.finish()
    except OSError:
        return None
    diff_file = None
    if tracker.diff_file is not None and (changes or tracker.ignored):
        path = tracker.diff_file
        turn = 1
        while os.path.lexists(path):  # the top agent of a chat: one change set per turn
            turn += 1
            path = tracker.diff_file.with_name(f"{tracker.diff_file.stem}-{turn}.diff")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            text = unified_diff(tracker.store, changes) + ignored_changes.section(tracker.ignored)
            state.write_file(path.parent, path.name, text.encode("utf-8", "surrogateescape"))
            diff_file = f"{path.parent.name}/{path.name}"
        except OSError:
            diff_file = None
    events.emit(
        ChangeSet(
            before=tracker.before_id,
            after=after_id,
            files=[c.as_json() for c in changes],
            diff_file=diff_file,
            ignored=[c.as_json() for c in tracker.ignored] or None,
        )
    )
    return changes


# -- showing a change set ---------------------------------------------------------

MAX_DIFF_LINES_PER_FILE = 5000


def unified_diff(store: Store, changes: list[Change]) -> str:
    """The change set as git writes a patch: `git apply` and `patch -p1` read it."""
    parts = []
    for change in changes:
        old_path = change.old_path or change.path
        lines = [f"diff --git {quoted('a/', old_path)} {quoted('b/', change.path)}"]
        before, after = change.before, change.after
        if change.kind == "added" and after is not None:
            lines.append(f"new file mode {after.mode:o}")
        elif change.kind == "deleted" and before is not None:
            lines.append(f"deleted file mode {before.mode:o}")
        elif before is not None and after is not None and before.mode != after.mode:
            lines += [f"old mode {before.mode:o}", f"new mode {after.mode:o}"]
        if change.kind == "renamed":
            lines += [f"rename from {quoted('', old_path)}", f"rename to {quoted('', change.path)}"]
        if before is None or after is None or before.digest != after.digest:
            lines += _content_diff(store, change, old_path)
        parts.append("\n".join(lines) + "\n")
    return "".join(parts)


_ESCAPES = {"\n": "\\n", "\t": "\\t", '"': '\\"', "\\": "\\\\"}


def quoted(prefix: str, path: str) -> str:
    """A path as git writes it in a patch: C-quoted when it holds a control character, a
    quote, a backslash or bytes that are not UTF-8, so no name can add lines of its own."""
    if all(c.isprintable() and c not in _ESCAPES for c in path):
        return prefix + path
    out = []
    for char in prefix + path:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        else:
            out.extend(f"\\{b:03o}" for b in char.encode("utf-8", "surrogateescape"))
    return '"' + "".join(out) + '"'


def _content_diff(store: Store, change: Change, old_path: str) -> list[str]:
    old = _text(store, change.before)
    new = _text(store, change.after)
    if old is None or new is None:
        return [f"Binary files {quoted('a/', old_path)} and {quoted('b/', change.path)} differ"]
    a = quoted("a/", old_path) if change.before is not None else "/dev/null"
    b = quoted("b/", change.path) if change.after is not None else "/dev/null"
    out = list(difflib.unified_diff(old, new, a, b, lineterm="", n=3))
    if len(out) > MAX_DIFF_LINES_PER_FILE:
        out = [
            *out[:MAX_DIFF_LINES_PER_FILE],
            f"[... {len(out) - MAX_DIFF_LINES_PER_FILE} more lines]",
        ]
    return out


def _text(store: Store, entry: Entry | None) -> list[str] | None:
    """The lines of a kept text content; [] for none; None for binary or not kept."""
    if entry is None:
        return []
    if not entry.kept:
        return None
    try:
        data = store.read(entry.digest)
    except KeyError:
        return None
    if entry.mode == LINK_MODE:
        return [os.fsdecode(data), "\\ No newline at end of file"]
    if b"\0" in data[:8192]:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    elif lines:
        lines.append("\\ No newline at end of file")
    return lines
