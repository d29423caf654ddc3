"""One editing agent's view of the workspace while it works: what each of its calls
changed (snapshots before and after it), its change set at the end, and the `change_set`
line in the log. What someone else changed between its calls is never its own."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable
from pathlib import Path

from workers import state
from workers.changes import ignored_changes
from workers.changes.change_sets import Change, combine, compare, unified_diff
from workers.changes.ignored_changes import IgnoredChange
from workers.changes.snapshots import LINK_MODE, Store, Tree
from workers.log.events import Emitter
from workers.log.schema import ChangeSet
from workers.processes import CLOCK_SLACK_NS


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
            self.mark()

    def mark(self) -> Tree:
        """The workspace now, as the agent's next step starts from it (a call, or gaffer
        about to write for it): what changed since its last step is someone else's."""
        self._since_ns = time.time_ns()
        self._last = self.store.scan()
        return self._last

    def changed_by_call(self) -> list[Change]:
        """What changed since the call started (the call just made, or workers it ran)."""
        self._in_flight = max(0, self._in_flight - 1)
        return self._step()

    def look(self) -> Tree:
        """The workspace now, taken as the last look: what changed since the last `mark`
        or step is the agent's (gaffer itself wrote or put back files for it)."""
        self._step()
        return self._last

    def steps_taken(self) -> int:
        return len(self._steps)

    def changes_since(self, steps: int) -> list[Change]:
        """What the agent's steps after the first `steps` changed (`steps_taken` then)."""
        return combine(self._steps[steps:])

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
