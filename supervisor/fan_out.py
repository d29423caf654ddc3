"""A fan-out: one delegate call with several tasks for one profile, one worker each.

Workers that may run side by side (read-only ones, and editors on a copy of their own)
start together, as far as the scheduler lets them (`--max-parallel`); other editors run
one after another. Either way their reports come back in the order of the tasks, as one
tool result: a small model writes one call more reliably than several, and a large one
saves a turn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from workers.facts import Facts
from workers.tools.base import ToolResult

Finish = Callable[[], ToolResult]
"""What waits for a started worker's report."""


class Together:
    """The reports of workers already started, in order, once each. On Ctrl-C every
    worker is cancelled and waited for (each logs its end) before the interrupt goes on
    up; asked again after that (as a batch's caller does), it gives what it has."""

    def __init__(self, started: Sequence[Finish], cancel: Callable[[], None]) -> None:
        self.started, self.cancel = list(started), cancel
        self.results: dict[int, ToolResult] = {}

    def __call__(self) -> ToolResult:
        try:
            self._finish_all()
        except KeyboardInterrupt:
            self.cancel()
            self._finish_all()
            raise
        return combined([self.results[i] for i in range(len(self.started))])

    def _finish_all(self) -> None:
        for number, finish in enumerate(self.started):
            if number not in self.results:
                self.results[number] = finish()


def in_turn(tasks: Sequence[str], run: Callable[[str], ToolResult]) -> ToolResult:
    """Workers that must not overlap, each started once the one before has ended."""
    return combined([run(task) for task in tasks])


def combined(results: Sequence[ToolResult]) -> ToolResult:
    """One result for the batch: each worker's report in order, and their facts as the
    batch's evidence (what each changed, how each ended)."""
    if len(results) == 1:  # its report whole, whatever the caller's window cuts of it
        return dataclasses.replace(results[0], parts=(results[0].output,))
    facts = [r.facts for r in results]
    workers = [f.worker for f in facts if f.worker]
    # A task the run refused to start has no worker: it is named by its place.
    failed = [
        f.worker or f"task {number} (not started)"
        for number, (f, r) in enumerate(zip(facts, results, strict=True), 1)
        if (f.status or ("failed" if r.is_error else "completed")) != "completed"
    ]
    modified = tuple(dict.fromkeys(p for f in facts for p in f.modified))
    head = f"{len(results)} workers, in the order of their tasks: " + (
        f"{len(results) - len(failed)} completed"
        + (f"; not completed: {', '.join(failed)}" if failed else "")
    )
    return ToolResult(
        output="\n\n".join([head, *(r.output for r in results)]),
        parts=tuple(r.output for r in results),
        summary=f"{len(results)} workers, {len(failed)} not completed, {len(modified)} files changed",
        is_error=bool(failed),
        facts=Facts(
            worker=", ".join(workers) or None,
            status="completed" if not failed else "failed",
            modified=modified,
            evidence=tuple(facts),
        ),
    )
