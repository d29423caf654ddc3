"""An isolated editor's run (`--isolate`, or `isolate = true` in its profile): a copy of
the workspace made while no editor writes, the worker's whole run on that copy beside
other isolated editors, then its change set brought into the workspace under the editor
lock, all or nothing (workers/changes/merging.py), and the copy removed however it ended.

A conflict writes nothing; the worker's report names the files and their hunks, and its
whole change set stays in the run's diff folder, so the supervisor can hand a resolution
to another worker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from supervisor.scheduler import NotStarted, Scheduler, Work
from workers.agent import AgentResult
from workers.changes.change_sets import compare
from workers.changes.merging import Merged, merge_change_set
from workers.changes.snapshots import Store, Tree
from workers.changes.worktrees import CannotIsolate
from workers.limits import Budget
from workers.log.events import Emitter
from workers.log.schema import Merge
from workers.outcome import Failed
from workers.sandbox import SandboxUnavailable

# How long a finished editor may wait for the editor lock to bring its changes in.
MERGE_WAIT_S = 600.0


RunOnCopy = Callable[[Callable[[list[Any]], None], Any], AgentResult]
"""(the callback for what its sandbox moved aside, its copy) -> the worker's run."""


def isolated_work(
    scheduler: Scheduler,
    store: Store | None,
    events: Emitter,
    agent_id: str,
    lineage: tuple[str, ...],
    budget: Budget,
    run: RunOnCopy,
    make_copy: Callable[[str], Any],
) -> Work:
    """The scheduler's work for an isolated editor; `events` bound to it; `make_copy`
    gives its copy (a worktree, or a bundle for a cluster node), with `base` and
    `remove()`."""

    def work(quarantined: Callable[[list[Any]], None]) -> AgentResult:
        if store is None:
            return AgentResult(Failed("this run keeps no snapshots, so it cannot isolate"), [])
        try:
            with scheduler.hold(agent_id, lineage, exclusive=False, budget=budget):
                copy = make_copy(agent_id)
        except (CannotIsolate, SandboxUnavailable) as error:
            return AgentResult(Failed(str(error), kind="sandbox"), [])
        try:
            with scheduler.slot(agent_id, budget):
                result = run(quarantined, copy)
            if copy.store is not None:
                # Seen again now that its sandbox is gone and swept: what the sweep moved
                # aside (a planted hook or repository) never comes in; and seen even when
                # the agent could keep no change set of its own.
                result.changes = compare(copy.start, copy.store.snapshot()[1])
            if not result.changes:
                return result
            merged = _bring_in(scheduler, store, agent_id, lineage, budget, result, copy.base)
            # Its line says where the change was made, as the worker's own lines do.
            (events.bind(node=result.node) if result.node else events).emit(
                Merge(
                    status=merged.status,
                    files=[c.as_json() for c in merged.applied],
                    conflicts=[c.as_json() for c in merged.conflicts],
                    before=merged.before,
                    after=merged.after,
                    reason=merged.skipped,
                )
            )
            result.changes, result.merge = merged.applied, merged
            return result
        finally:
            copy.remove()

    return work


def _bring_in(
    scheduler: Scheduler,
    store: Store,
    agent_id: str,
    lineage: tuple[str, ...],
    budget: Budget,
    result: AgentResult,
    base: Tree,
) -> Merged:
    """The worker's change set in the workspace, or why not. A worker that stopped at a
    limit still brings in what it did, as an editor on the workspace would have left it;
    a cancelled one brings in nothing."""
    assert result.changes is not None
    skipped = Merged(skipped="it was cancelled before its changes came in")
    if budget.cancelled():
        return skipped
    wait = Budget(None, MERGE_WAIT_S)
    unregister = budget.on_cancel(wait.cancel)
    try:
        with scheduler.hold(agent_id, lineage, exclusive=True, budget=wait):
            return merge_change_set(store, base, result.changes)
    except NotStarted:
        return skipped
    finally:
        unregister()
