"""The run's check, held once per run: chosen from the flag, the config, the user's task or
the project's files (choose.py), and run by gaffer (run.py) wherever an agent that changed
files answers, and at the run's end. The workspace as the run found it is its baseline:
in the check's copy, the tests the task keeps and every file that steers a test run go
back to it, whatever the agents did.

A check over a workspace that has not changed since the last one (every file's size,
time and kind the same, the same command and the same files put back) is that one's
verdict again: a supervisor answering over its worker's change, and the run's end after
it, cost one run of the suite, not three.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.changes import ignored_changes
from workers.changes.snapshots import LINK_MODE, Store, Tree
from workers.check.choose import Check, NoCheck, choose
from workers.check.report import CheckRun
from workers.check.run import MAX_COPY_BYTES, NOT_COPIED, reap_checks, run_check
from workers.guards.task_rules import kept_tests
from workers.guards.test_runs import status_command
from workers.log.events import Emitter
from workers.log.schema import CheckRan
from workers.sandbox import SandboxUnavailable
from workers.sandbox.options import DockerOptions

# What decides a test run besides its tests: put back as they were at the start (or taken
# away when an agent made them) in the check's copy.
STEERING = frozenset(
    {"conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"}
    | {"sitecustomize.py", "usercustomize.py"}
)
# What steers a run of these runners besides: a `make test` runs the Makefile's recipe.
RUNNER_FILES = {
    "make": frozenset({"Makefile", "makefile", "GNUmakefile"}),
    "npm": frozenset({"package.json"}),
    "yarn": frozenset({"package.json"}),
    "pnpm": frozenset({"package.json"}),
    "nox": frozenset({"noxfile.py"}),
}
# Folders whose files are the tests' own (their data too), where the task keeps its tests.
TEST_FOLDERS = frozenset({"test", "tests", "testing", "spec"})
# A suite that takes longer than this on the check's one CPU is stopped and the check says
# it timed out. Once a check passed, later ones get a margin over the longest (never
# under a minute): a change that makes the suite hang fails in minutes, not five.
CHECK_SECONDS = 300.0
CHECK_MARGIN = 3.0
MIN_CHECK_SECONDS = 60.0


@dataclass
class Checker:
    workspace: Path
    """The run's workspace; an isolated editor's check runs over its own copy of it."""
    flag: str | None = None
    config: str | None = None
    runners: tuple[str, ...] = ()
    """Test runners besides the known ones (the config's test_runners)."""
    options: DockerOptions = field(default_factory=DockerOptions)
    uid: int | None = None
    """Whom the check runs as; None: the workspace's owner."""
    store: Store | None = None
    """The run's snapshots: without them nothing can be put back (no agent could write)."""
    seconds: float = CHECK_SECONDS
    docker_client: Any = None
    """The Docker client; None: made at the first check."""
    baseline_id: str | None = None
    """The snapshot the run's check puts back to: a resumed run's is the first run's (what
    its agents changed before the kill is theirs too); None: the workspace now."""
    _baseline: Tree | None = field(default=None, init=False)
    _ignored_at_start: ignored_changes.Seen = field(default_factory=dict, init=False)
    _last: tuple[str, CheckRun] | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _chosen: dict[str, Check | NoCheck] = field(default_factory=dict, init=False)
    _suite_s: float | None = field(default=None, init=False)
    """How long the longest passing check took (a failing one may have stopped early)."""
    _large_at_start: bool = field(default=False, init=False)
    _no_docker: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        reap_checks(self.workspace)  # the copies of a killed run's checks
        self._large_at_start = _larger_than(self.workspace, MAX_COPY_BYTES)
        if self.store is not None:
            try:
                self._baseline = self._resumed_baseline()
                if self._baseline is None:
                    self.baseline_id, self._baseline = self.store.snapshot()
                self._ignored_at_start = ignored_changes.look(self.workspace, self._baseline)
            except OSError:  # an unreadable workspace: the check puts nothing back
                self._baseline = None

    def _resumed_baseline(self) -> Tree | None:
        assert self.store is not None
        if self.baseline_id is None:
            return None
        try:
            return self.store.tree(self.baseline_id)
        except KeyError:  # gone from the store: the workspace now is all there is
            self.baseline_id = None
            return None

    def choose(self, task: str) -> Check | NoCheck:
        """The check for `task`, chosen once: the first time, before its agents change
        anything (an agent that deletes the tests does not make the run unchecked)."""
        if (chosen := self._chosen.get(task)) is None:
            chosen = self._chosen[task] = choose(
                self.workspace, task, flag=self.flag, config=self.config
            )
        return chosen

    def run(self, task: str, events: Emitter, workspace: Path | None = None) -> CheckRun:
        """The check over `workspace` (the run's own by default), logged as a `check`
        line of the agent `events` speaks for. One check runs at a time."""
        with self._lock:
            last = self._last
            done = self._run(task, workspace or self.workspace)
        events.emit(
            CheckRan(
                verdict=done.verdict,
                command=done.command or None,
                source=done.source or None,
                exit=done.exit,
                passed=done.passed,
                failed=done.failed,
                seconds=round(done.seconds, 3),
                detail=done.detail,
                line=done.line(),
                reused=True if last is not None and done is last[1] else None,
            )
        )
        return done

    def _run(self, task: str, workspace: Path) -> CheckRun:
        chosen = self.choose(task)
        if isinstance(chosen, NoCheck):
            return CheckRun("unchecked", "", "", detail=chosen.reason)
        try:
            fingerprint, present = _look(workspace)
            restored, lost = self.restored(task, workspace, present, chosen.command)
        except OSError as error:
            return CheckRun(
                "unchecked", chosen.command, chosen.source, detail=f"cannot read: {error}"
            )
        if lost:
            why = f"changed, and not kept to put back as it was: {', '.join(lost[:5])}"
            return CheckRun("failed", chosen.command, chosen.source, detail=why, put_back=())
        key = _key(chosen, fingerprint, restored)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        if self.docker_client is None and self._no_docker is None:
            from workers.sandbox.docker import client

            try:
                self.docker_client = client()
            except SandboxUnavailable as error:  # asked once a run, not at every answer
                self._no_docker = f"no Docker to run it in: {error}"
        if self._no_docker is not None:
            return CheckRun("unchecked", chosen.command, chosen.source, detail=self._no_docker)
        try:
            done = run_check(
                chosen,
                workspace,
                restored=restored,
                options=self.options,
                seconds=self.deadline(),
                docker_client=self.docker_client,
                uid=self.uid,
                large_at_start=self._large_at_start,
            )
        except Exception as error:  # Docker failed under it: say so, never crash the agent
            why = f"Docker failed while checking: {type(error).__name__}: {error}"
            return CheckRun("unchecked", chosen.command, chosen.source, detail=why[:500])
        if done.verdict == "verified":
            self._suite_s = max(self._suite_s or 0.0, done.seconds)
        self._last = (key, done)
        return done

    def deadline(self) -> float:
        """Seconds the next check may take: fitted to the suite once a check passed."""
        if self._suite_s is None:
            return self.seconds
        return min(self.seconds, max(MIN_CHECK_SECONDS, CHECK_MARGIN * self._suite_s))

    def restored(
        self, task: str, workspace: Path, present: set[str], command: str = ""
    ) -> tuple[dict[str, bytes | None], list[str]]:
        """What the check's copy holds in place of the workspace's own: the tests the task
        keeps (their folders' data too) and every file that steers a test run, `command`'s
        runner included, as they were when the run began (None: it was not there); and
        those that changed though their start was not kept (too large, a link, git-ignored),
        which no check can run as they were. Without a baseline (no agent could write),
        nothing."""
        if self._baseline is None:
            return {}, []
        at_start = set(self._baseline)
        steering = STEERING | RUNNER_FILES.get((status_command(command) or [""])[0], frozenset())
        paths = {p for p in at_start | present if _steers(p, steering)}
        kept = kept_tests(task, workspace, self.runners, by_command=True)
        if kept is not None:  # what the task keeps, deleted since or not
            paths |= {p for p in at_start if kept.keeps(p) or _in_test_folder(p)}
            paths |= {
                p
                for p in present - at_start
                if kept.keeps(p, new=True) or (kept.new_files and _in_test_folder(p))
            }
        found: dict[str, bytes | None] = {}
        lost: list[str] = []
        for path in sorted(paths):
            if path in at_start:
                if (before := self._original(path)) is not None:
                    found[path] = before
                elif self._changed(workspace, path):
                    lost.append(path)
            elif path in self._ignored_at_start:
                if self._ignored_changed(workspace, path):
                    lost.append(path)  # git-ignored: its content was never kept
            else:
                found[path] = None
        return found, lost

    def _changed(self, workspace: Path, path: str) -> bool:
        """Whether a file whose start was not kept is not as it was (by its digest)."""
        assert self._baseline is not None
        entry = self._baseline[path]
        try:
            if entry.mode == LINK_MODE:
                data = os.fsencode(os.readlink(workspace / path))
                return hashlib.sha256(data).hexdigest() != entry.digest
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            with os.fdopen(os.open(workspace / path, flags), "rb") as file:
                if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                    return True
                return hashlib.file_digest(file, "sha256").hexdigest() != entry.digest
        except OSError:
            return True

    def _original(self, path: str) -> bytes | None:
        assert self.store is not None and self._baseline is not None
        entry = self._baseline[path]
        if not entry.kept or entry.mode == LINK_MODE:
            return None
        try:
            return self.store.read(entry.digest)
        except KeyError:
            return None

    def _ignored_changed(self, workspace: Path, path: str) -> bool:
        """Whether a git-ignored file that was there at the start is not as it was."""
        try:
            info = os.lstat(workspace / path)
        except OSError:
            return True
        size, mtime, _ctime, inode, mode = self._ignored_at_start[path]
        return (info.st_size, info.st_mtime_ns, info.st_ino, info.st_mode) != (
            size,
            mtime,
            inode,
            mode,
        )


def _steers(path: str, steering: frozenset[str]) -> bool:
    """A file that steers a test run, wherever it is (pytest follows a link to any folder,
    and a conftest.py in a `venv` is collected as any other)."""
    name = path.rpartition("/")[2]
    return name in steering or name.endswith(".pth")


def _in_test_folder(path: str) -> bool:
    return any(part in TEST_FOLDERS for part in path.split("/")[:-1])


def _larger_than(workspace: Path, limit: int) -> bool:
    """Whether the workspace's files (by their sizes, as the check would copy them) come to
    more than `limit`."""
    total = 0
    for folder, dirs, files in os.walk(workspace):
        dirs[:] = [d for d in dirs if d not in NOT_COPIED]
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
        if total > limit:
            return True
    return False


def _look(workspace: Path) -> tuple[str, set[str]]:
    """The workspace's fingerprint (every path with its size, time and kind, as the check
    copies it) and its files."""
    digest = hashlib.sha256()
    present: set[str] = set()
    for folder, dirs, files in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if d not in NOT_COPIED)
        rel = os.path.relpath(folder, workspace)
        for name in sorted([*files, *dirs]):
            path = name if rel == "." else f"{rel}/{name}"
            info = os.lstat(os.path.join(folder, name))
            digest.update(os.fsencode(path))
            # ctime and inode too: mtime can be set back, ctime cannot.
            stamp = (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_mode)
            digest.update(("\0" + "\0".join(map(str, stamp)) + "\n").encode())
        present.update(name if rel == "." else f"{rel}/{name}" for name in files)
    return digest.hexdigest(), present


def _key(check: Check, fingerprint: str, restored: dict[str, bytes | None]) -> str:
    digest = hashlib.sha256(f"{check.command}\0{fingerprint}".encode())
    for path, data in sorted(restored.items()):
        digest.update(os.fsencode(path) + b"\0")
        digest.update(hashlib.sha256(data).digest() if data is not None else b"-")
    return digest.hexdigest()
