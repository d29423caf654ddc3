"""Where workers run: each in a thread of its own, under one read/write lock on the
workspace. Readers share the lock, at most `max_parallel` at once; an editor holds it
alone, so a reader never sees a half-made change and two editors never write at once,
whatever order a batch mixes them in. Under an agent that holds the lock, its own
workers share a lock of their own by the same rules: they work inside their ancestor's
hold instead of waiting for it forever, and still never overlap an editor with readers.

A worker's thread is the only one it gets: its caller starts it and later waits on it,
so a batch of readers starts together without a pool of waiting threads. The caller
keeps the worker's wall clock itself, waiting for the lock included, and answers a
cancel at once (the budget wakes every waiter, nobody polls): a worker stuck in a call
that ignores cancellation is reported and left to die on its own.

Why no nested deadlock: readers cannot delegate (delegate is not a read-only tool), so
a reader never waits for a reader slot, and an editor waits only on workers in the
scope of its own lock.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from workers.agent import AgentResult
from workers.limits import Budget
from workers.outcome import Aborted, Failed, Interrupted, LimitHit, reason_of, status_of
from workers.sandbox import NodeLost, SandboxUnavailable

# A worker past its wall clock gets this long to notice its cancellation before its
# caller stops waiting and reports `timeout`.
TIMEOUT_GRACE_S = 5.0
# How long a cancelled run waits for its workers to write their last log lines.
SHUTDOWN_WAIT_S = 5.0

MovedAside = list[Any]
"""What a worker's sandbox planted that the host would run, moved aside (quarantine.Quarantined)."""


class NotStarted(Exception):
    """A worker stopped waiting for the workspace: cancelled, or out of time."""

    def __init__(self, outcome: Aborted | LimitHit) -> None:
        super().__init__(reason_of(outcome))
        self.outcome = outcome


def why_stop_waiting(budget: Budget) -> Aborted | LimitHit | None:
    if budget.cancelled():
        return Aborted("cancelled")
    seconds = budget.seconds_left()
    if seconds is not None and seconds <= 0:
        return LimitHit("time", "the wall clock ran out while it waited for the workspace")
    return None


class WorkspaceLock:
    """Readers together (at most `max_readers`) or one editor alone. An editor waiting
    keeps new readers out, so a stream of readers cannot starve it. A reader past its
    wall clock and grace stops holding the lock even if its thread is stuck: it is
    being abandoned, and can change nothing."""

    def __init__(self, max_readers: int) -> None:
        self._cond = threading.Condition()
        self._max_readers = max_readers
        self._writer: str | None = None
        self._readers: dict[str, float | None] = {}
        """Each reader and when it stops holding the lock (None: when it releases)."""
        self._writers_waiting = 0

    def acquire(
        self, agent_id: str, *, exclusive: bool, budget: Budget, expires: float | None = None
    ) -> None:
        """Wait for the lock; NotStarted when `budget` is cancelled or spent first.
        A reader's hold lapses at `expires` (time.monotonic())."""

        def wake() -> None:
            with self._cond:
                self._cond.notify_all()

        unregister = budget.on_cancel(wake)
        with self._cond:
            if exclusive:
                self._writers_waiting += 1
            try:
                # A cancelled or spent worker never takes the lock, even a free one.
                while (why := why_stop_waiting(budget)) is None and not self._free_for(exclusive):
                    self._cond.wait(self._wait_for(budget))
                if why is not None:
                    raise NotStarted(why)
            finally:
                unregister()
                if exclusive:
                    self._writers_waiting -= 1
                    self._cond.notify_all()  # readers held back only by this editor go on
            if exclusive:
                self._writer = agent_id
            else:
                self._readers[agent_id] = expires

    def release(self, agent_id: str) -> None:
        with self._cond:
            if self._writer == agent_id:
                self._writer = None
            self._readers.pop(agent_id, None)
            self._cond.notify_all()

    def _free_for(self, exclusive: bool) -> bool:
        now = time.monotonic()
        for reader, expires in list(self._readers.items()):
            if expires is not None and expires <= now:
                del self._readers[reader]
        if self._writer is not None:
            return False
        if exclusive:
            return not self._readers
        return self._writers_waiting == 0 and len(self._readers) < self._max_readers

    def _wait_for(self, budget: Budget) -> float | None:
        """Seconds until the waiter's wall clock ends or a reader's hold lapses."""
        ends = [e for e in self._readers.values() if e is not None]
        if (deadline := budget.deadline_at()) is not None:
            ends.append(deadline)
        return max(0.0, min(ends) - time.monotonic()) if ends else None


class _NoLock:
    """What an isolated editor's thread holds for its whole run: nothing."""

    def acquire(self, agent_id: str, **_: object) -> None:
        pass

    def release(self, agent_id: str) -> None:
        pass


@dataclass(frozen=True)
class WorkerRun:
    """How a worker's run ended, as its caller saw it."""

    status: str
    reason: str
    result: AgentResult
    quarantined: MovedAside = field(default_factory=list)


Work = Callable[[Callable[[MovedAside], None]], AgentResult]
"""A worker's run; it reports what its sandbox moved aside through the callback."""


class Scheduler:
    def __init__(self, max_parallel: int = 4) -> None:
        self.max_parallel = max_parallel
        self._locks: dict[str | None, WorkspaceLock] = {None: WorkspaceLock(max_parallel)}
        """One lock per scope: the run's own, and one for the workers of each agent that
        holds a lock (their ancestor's hold covers them, and they share it by the rules)."""
        self._holding: set[str] = set()
        self._merging: set[str] = set()
        """Isolated editors bringing their change set in (an exclusive `hold`)."""
        self._isolated = WorkspaceLock(max_parallel)
        """Slots for isolated editors (workers/changes/worktrees.py): each works on a copy of its
        own, so they share no lock while they work, only `max_parallel` at once."""
        self._threads: list[threading.Thread] = []
        self._mutex = threading.Lock()

    def _lock_for(self, lineage: tuple[str, ...]) -> WorkspaceLock:
        with self._mutex:
            scope = next((a for a in reversed(lineage) if a in self._holding), None)
            return self._locks.setdefault(scope, WorkspaceLock(self.max_parallel))

    def start(
        self,
        agent_id: str,
        lineage: tuple[str, ...],
        *,
        exclusive: bool,
        budget: Budget,
        work: Work,
        isolated: bool = False,
    ) -> Callable[[], WorkerRun]:
        """Start `work` in a thread of its own once the workspace lock allows; returns
        what waits for it within `budget`'s wall clock (waiting for the lock included).
        `budget` is the worker's own: cancelling its caller's cancels it too. An
        `isolated` editor takes no lock here: its work takes the workspace lock for a
        moment at a time (`hold`) and a slot while it works on its copy (`slot`), never
        both at once, so slots held never wait on the workspace."""
        box: dict[str, Any] = {}
        finished = threading.Condition()
        hold = {"held": False, "given_up": False}  # under `guard`
        guard = threading.Lock()
        lock: WorkspaceLock | _NoLock = _NoLock() if isolated else self._lock_for(lineage)
        budget_deadline = budget.deadline_at()
        deadline = None if budget_deadline is None else budget_deadline + TIMEOUT_GRACE_S

        def quarantined(moved: MovedAside) -> None:
            box["quarantined"] = moved

        def release() -> None:
            """Let go of the worker's hold, once, and only if it has one."""
            with guard:
                held, hold["held"] = hold["held"], False
            if held:
                with self._mutex:
                    self._holding.discard(agent_id)
                    self._locks.pop(agent_id, None)
                lock.release(agent_id)

        def give_up() -> None:
            """The caller stops waiting: a hold taken later is let go at once."""
            with guard:
                hold["given_up"] = True
            release()

        def thread_body() -> None:
            try:
                lock.acquire(agent_id, exclusive=exclusive, budget=budget, expires=deadline)
                with guard:
                    hold["held"] = True
                    late = hold["given_up"]
                if late:
                    release()
                    raise NotStarted(Aborted("cancelled"))
                if not isolated:
                    with self._mutex:
                        self._holding.add(agent_id)
                box["result"] = work(quarantined)
            except NotStarted as waited:
                box["result"] = AgentResult(waited.outcome, [])
            except SandboxUnavailable as error:
                box["result"] = AgentResult(Failed(str(error), kind="sandbox"), [])
            except NodeLost as error:  # its cluster node died before or after its loop
                box["result"] = AgentResult(Interrupted(str(error)), [])
            except BaseException as error:  # a harness fault (or a SystemExit) in one worker
                box["result"] = AgentResult(Failed(f"{type(error).__name__}: {error}"), [])
            finally:
                release()
                with finished:
                    box["done"] = True
                    finished.notify_all()

        def wake() -> None:
            with finished:
                finished.notify_all()

        def wait() -> WorkerRun:
            unregister = budget.on_cancel(wake)
            try:
                with finished:
                    while "done" not in box:
                        gave_up = self._give_up(budget, deadline)
                        if gave_up is not None and agent_id in self._merging:
                            # Bringing its changes in under the editor lock: short, and
                            # never left half done behind a caller that moved on.
                            finished.wait(0.05)
                            continue
                        if gave_up is not None:
                            # A reader left behind can change nothing, so it stops holding
                            # editors up, and an isolated editor only its own copy (its
                            # cancelled budget keeps it from the workspace); an editor left
                            # behind keeps the lock until it is really gone.
                            if not exclusive or isolated:
                                give_up()
                            return gave_up
                        finished.wait(None if deadline is None else deadline - time.monotonic())
            finally:
                unregister()
            result: AgentResult = box["result"]
            return WorkerRun(
                status_of(result.outcome),
                reason_of(result.outcome),
                result,
                box.get("quarantined", []),
            )

        thread = threading.Thread(target=thread_body, name=f"gaffer-{agent_id}", daemon=True)
        with self._mutex:
            self._threads.append(thread)
        thread.start()
        return wait

    @contextlib.contextmanager
    def slot(self, agent_id: str, budget: Budget) -> Iterator[None]:
        """One of `max_parallel` places for isolated editors at work on their copies;
        NotStarted when `budget` is cancelled or spent first. Like a reader's hold, the
        slot lapses past the editor's wall clock and grace, even if its thread is stuck."""
        deadline = budget.deadline_at()
        expires = None if deadline is None else deadline + TIMEOUT_GRACE_S
        self._isolated.acquire(agent_id, exclusive=False, budget=budget, expires=expires)
        try:
            yield
        finally:
            self._isolated.release(agent_id)

    @contextlib.contextmanager
    def hold(
        self, agent_id: str, lineage: tuple[str, ...], *, exclusive: bool, budget: Budget
    ) -> Iterator[None]:
        """The workspace lock for a moment (an isolated editor's copy made, or its change
        set brought in); NotStarted when `budget` is cancelled or spent first."""
        lock = self._lock_for(lineage)
        lock.acquire(f"{agent_id}:hold", exclusive=exclusive, budget=budget)
        if exclusive:
            with self._mutex:
                self._merging.add(agent_id)
        try:
            yield
        finally:
            with self._mutex:
                self._merging.discard(agent_id)
            lock.release(f"{agent_id}:hold")

    @staticmethod
    def _give_up(budget: Budget, deadline: float | None) -> WorkerRun | None:
        if budget.cancelled():
            return WorkerRun("cancelled", "cancelled", AgentResult(Aborted("cancelled"), []))
        if deadline is not None and time.monotonic() > deadline:
            budget.cancel()
            return WorkerRun(
                "timeout", "the worker's wall clock ran out", AgentResult(Aborted("timeout"), [])
            )
        return None

    def shutdown(self) -> None:
        """Wait briefly for workers to write their last lines, then let the rest go."""
        deadline = time.monotonic() + SHUTDOWN_WAIT_S
        with self._mutex:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
