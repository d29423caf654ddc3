"""Where workers run: each in a thread of its own, under one read/write lock on the
workspace. Readers share the lock; an editor holds it alone, so a reader never sees a
half-made change and two editors never write at once, whatever order a batch mixes them
in. Under an agent that holds the lock, its own workers share a lock of their own by
the same rules: they work inside their ancestor's hold instead of waiting for it forever,
and still never overlap an editor with readers.

The caller keeps each worker's wall clock itself, waiting for the lock included, and
answers a cancel at once: a worker stuck in a call that never returns is reported and
left to die on its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workers.agent import AgentResult
from workers.limits import Budget
from workers.outcome import Aborted, Failed, LimitHit, reason_of, status_of
from workers.sandbox import SandboxUnavailable

# A worker past its wall clock gets this long to notice its cancellation before its
# caller stops waiting and reports `timeout`.
TIMEOUT_GRACE_S = 5.0
# How long a cancelled run waits for its workers to write their last log lines.
SHUTDOWN_WAIT_S = 5.0
# How often a waiting thread looks up to check for a cancel.
WAIT_POLL_S = 0.1

MovedAside = list[Any]
"""What a worker's sandbox planted that the host would run, moved aside (guard.Quarantined)."""


class NotStarted(Exception):
    """A worker stopped waiting for the workspace: cancelled, or out of time."""

    def __init__(self, outcome: Aborted | LimitHit) -> None:
        super().__init__(reason_of(outcome))
        self.outcome = outcome


class WorkspaceLock:
    """Readers together or one editor alone. An editor waiting keeps new readers out, so
    a stream of readers cannot starve it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._writer: str | None = None
        self._readers: dict[str, int] = {}
        self._writers_waiting = 0

    def acquire(
        self, agent_id: str, *, exclusive: bool, stop: Callable[[], Aborted | LimitHit | None]
    ) -> None:
        """Wait for the lock; NotStarted when `stop` says why waiting is over first."""
        with self._cond:
            if exclusive:
                self._writers_waiting += 1
            try:
                while not self._free_for(exclusive):
                    if (why := stop()) is not None:
                        raise NotStarted(why)
                    self._cond.wait(WAIT_POLL_S)
            finally:
                if exclusive:
                    self._writers_waiting -= 1
            if exclusive:
                self._writer = agent_id
            else:
                self._readers[agent_id] = self._readers.get(agent_id, 0) + 1

    def release(self, agent_id: str) -> None:
        with self._cond:
            if self._writer == agent_id:
                self._writer = None
            elif agent_id in self._readers:
                self._readers[agent_id] -= 1
                if not self._readers[agent_id]:
                    del self._readers[agent_id]
            self._cond.notify_all()

    def _free_for(self, exclusive: bool) -> bool:
        if self._writer is not None:
            return False
        return not self._readers if exclusive else self._writers_waiting == 0


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
    def __init__(self) -> None:
        self._locks: dict[str | None, WorkspaceLock] = {None: WorkspaceLock()}
        """One lock per scope: the run's own, and one for the workers of each agent that
        holds a lock (their ancestor's hold covers them, and they share it by the rules)."""
        self._holding: set[str] = set()
        self._threads: list[threading.Thread] = []
        self._mutex = threading.Lock()

    def _lock_for(self, lineage: tuple[str, ...]) -> WorkspaceLock:
        with self._mutex:
            scope = next((a for a in reversed(lineage) if a in self._holding), None)
            return self._locks.setdefault(scope, WorkspaceLock())

    def run(
        self,
        agent_id: str,
        lineage: tuple[str, ...],
        *,
        exclusive: bool,
        budget: Budget,
        cancelled: Callable[[], bool],
        work: Work,
    ) -> WorkerRun:
        """Run `work` once the workspace lock allows, and wait for it within `budget`'s
        wall clock (waiting for the lock included); `cancelled` is the caller's cancel."""
        box: dict[str, Any] = {}
        started = threading.Event()  # set once the worker holds the lock (or never will)
        released = threading.Lock()  # taken by the one release of the worker's hold
        lock = self._lock_for(lineage)

        def quarantined(moved: MovedAside) -> None:
            box["quarantined"] = moved

        def release() -> None:
            if released.acquire(blocking=False):
                with self._mutex:
                    self._holding.discard(agent_id)
                    self._locks.pop(agent_id, None)
                lock.release(agent_id)

        def stop() -> Aborted | LimitHit | None:
            if cancelled() or budget.cancelled():
                return Aborted("cancelled")
            seconds = budget.seconds_left()
            if seconds is not None and seconds <= 0:
                return LimitHit("time", "the wall clock ran out while it waited for the workspace")
            return None

        def thread_body() -> None:
            took = False
            try:
                lock.acquire(agent_id, exclusive=exclusive, stop=stop)
                took = True
                with self._mutex:
                    self._holding.add(agent_id)
                started.set()
                box["result"] = work(quarantined)
            except NotStarted as waited:
                box["result"] = AgentResult(waited.outcome, [])
            except SandboxUnavailable as error:
                box["result"] = AgentResult(Failed(str(error), kind="sandbox"), [])
            except Exception as error:  # a harness fault in one worker must reach its caller
                box["result"] = AgentResult(Failed(f"{type(error).__name__}: {error}"), [])
            finally:
                started.set()
                if took:
                    release()

        thread = threading.Thread(target=thread_body, name=f"gaffer-{agent_id}", daemon=True)
        with self._mutex:
            self._threads.append(thread)
        thread.start()
        started.wait()
        seconds = budget.seconds_left()
        deadline = (
            None if seconds is None else time.monotonic() + max(0.0, seconds) + TIMEOUT_GRACE_S
        )
        while thread.is_alive():
            thread.join(WAIT_POLL_S)
            gave_up: WorkerRun | None = None
            if thread.is_alive() and budget.cancelled():
                gave_up = WorkerRun("cancelled", "cancelled", AgentResult(Aborted("cancelled"), []))
            elif thread.is_alive() and deadline is not None and time.monotonic() > deadline:
                budget.cancel()
                gave_up = WorkerRun(
                    "timeout",
                    "the worker's wall clock ran out",
                    AgentResult(Aborted("timeout"), []),
                )
            if gave_up is not None:
                # A reader left behind can change nothing, so it stops holding editors up;
                # an editor left behind keeps the lock until it is really gone.
                if not exclusive:
                    release()
                return gave_up
        result: AgentResult = box["result"]
        return WorkerRun(
            status_of(result.outcome),
            reason_of(result.outcome),
            result,
            box.get("quarantined", []),
        )

    def shutdown(self) -> None:
        """Wait briefly for workers to write their last lines, then let the rest go."""
        deadline = time.monotonic() + SHUTDOWN_WAIT_S
        with self._mutex:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
