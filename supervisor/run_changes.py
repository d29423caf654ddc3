"""A run's change sets, read back from its log: what `gaffer diff` shows and `gaffer undo`
puts back, for the whole run or one agent.

A run's change is its outermost editing agents' change sets, one after another (an
editor's own workers are inside its change set). An agent the log shows starting from
a snapshot but never ending (a run killed mid-edit) changed what differs between that
snapshot and the workspace now. A part undone already (workers/changes/undone.py) is
taken out of the change set that holds it, when that can be done exactly.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workers.log.reader import Line, lines_of, of_type
from workers.log.schema import AgentStart, ChangeSet, Merge, SessionStart, UserMessage

if TYPE_CHECKING:
    from workers.changes.change_sets import Change
    from workers.changes.ignored_changes import IgnoredChange
    from workers.changes.snapshots import Store

Record = dict[str, Any]


@dataclass(frozen=True)
class AgentChanges:
    agent_id: str
    changes: list[Change]
    finished: bool
    """False: the agent never ended; its changes are measured against the workspace now."""
    ignored: list[IgnoredChange] = field(default_factory=list)
    """What it changed among git-ignored files and caches (workers/changes/ignored_changes.py)."""
    key: str = ""
    """The change set's name in the record of undos (workers/changes/undone.py)."""
    turn: int = 0
    """The user's message it answered (a chat's turns count from 1; 0 before any)."""


class NoChanges(Exception):
    """What was asked for has no change set: one line for the user."""


@dataclass(frozen=True)
class RunChanges:
    """The change sets asked for, and within each, its editing workers' own."""

    store: Store
    chosen: list[AgentChanges]
    inner: dict[str, list[AgentChanges]] = field(default_factory=dict)
    """By a change set's key: the change sets of the editors directly under it."""


def agent_changes(records: list[Record], store: Store, agent: str | None) -> RunChanges:
    """The change sets of `agent` (each turn of a chat's top agent is one), or of the
    run's outermost editing agents, in the order they started."""
    lines = lines_of(records)
    # An isolated editor (or one on a cluster node) changed the workspace only through
    # its merge.
    merges = {line.agent_id: merge for line, merge in of_type(lines, Merge)}
    started = of_type(lines, AgentStart)
    starts = [(line, s) for line, s in started if s.snapshot or line.agent_id in merges]
    parents = {line.agent_id: line.parent_id for line, _ in started}
    editors = {line.agent_id for line, _ in starts}
    above = {a: _editor_above(a, parents, editors) for a in editors}
    if agent is not None:
        if agent not in parents:
            raise NoChanges(f"no agent {agent!r} in this run; `gaffer logs RUN` shows its agents")
        if agent not in editors:
            raise NoChanges(f"{agent} could change no files: it has no change set")
    elif not starts:
        raise NoChanges("no agent of this run could change files")
    every = _read_all(lines, starts, merges, store)
    chosen = [f for f in every if (f.agent_id == agent if agent else above[f.agent_id] is None)]
    inner: dict[str, list[AgentChanges]] = {f.key: [] for f in every}
    latest: dict[str, str] = {}  # each editor's start most recently seen, by its key
    for found in every:
        if (outer := above[found.agent_id]) is not None and outer in latest:
            inner[latest[outer]].append(found)
        latest[found.agent_id] = found.key
    return RunChanges(store, chosen, inner)


def _read_all(
    lines: list[Line],
    starts: list[tuple[Line, AgentStart]],
    merges: dict[str, Merge],
    store: Store,
) -> list[AgentChanges]:
    """Every editing agent's change set, named, in the order they started."""
    from workers.changes.change_sets import compare
    from workers.changes.undone import change_set_key

    session_id = next((line.session_id for line in lines if line.session_id), "")
    turns: dict[int, int] = {}
    turn = 0
    for line in lines:  # which user message each start answered
        if isinstance(line.event, UserMessage):
            turn += 1
        turns[id(line)] = turn
    ends = _pair_ends(lines)
    counted: Counter[str] = Counter()
    found = []
    for line, start in starts:
        agent_id = line.agent_id
        ordinal = counted[agent_id]
        counted[agent_id] += 1  # which of its agent's starts each one is
        turn = turns[id(line)]
        end: ChangeSet | Merge | None = ends.get(id(line))
        if start.worktree or agent_id in merges:
            end = merges.get(agent_id) or Merge(status="", files=[], conflicts=[])
        content = (
            {"snapshot": start.snapshot}
            if end is None
            else {"files": end.files, "ignored": getattr(end, "ignored", None)}
        )
        key = change_set_key(session_id, agent_id, ordinal, content)
        if end is not None:
            found.append(dataclasses.replace(_ended(agent_id, end), key=key, turn=turn))
            continue
        try:
            tree = store.tree(str(start.snapshot))
        except KeyError:
            raise NoChanges(
                f"{agent_id} never ended and its starting snapshot is not in {store.folder}"
            ) from None
        changed = compare(tree, store.scan())
        found.append(AgentChanges(agent_id, changed, finished=False, key=key, turn=turn))
    return found


def in_effect(
    run: RunChanges, done: dict[str, float]
) -> tuple[list[AgentChanges], list[AgentChanges]]:
    """The chosen change sets as (still in effect, undone already). A change set with an
    undone part is split into its own changes and its workers' change sets, when its
    changes are exactly theirs on every path they touched; otherwise it stays whole, and
    undoing it is refused as changed since (nothing is lost)."""
    live: list[AgentChanges] = []
    gone: list[AgentChanges] = []
    for found in run.chosen:
        try:
            kept, undone = _split(found, run.inner, done)
        except RecursionError:  # a planted log: real runs nest a few levels deep
            raise NoChanges("the log nests its agents too deep to read") from None
        live += kept
        gone += undone
    return live, gone


def _split(
    found: AgentChanges, inner: dict[str, list[AgentChanges]], done: dict[str, float]
) -> tuple[list[AgentChanges], list[AgentChanges]]:
    from workers.changes.change_sets import combine

    if found.key in done:
        return [], [found]
    workers = inner.get(found.key, [])
    if not any(_has_undone(w, inner, done) for w in workers):
        return [found], []
    theirs = combine([w.changes for w in workers])
    touched = {p for c in theirs for p in (c.path, c.old_path) if p is not None}
    mine = {c.path: c for c in found.changes}
    if any(c.path not in mine or mine[c.path] != c for c in theirs):
        return [found], []  # it changed their files too: not separable
    own_ignored = {c.path for w in workers for c in w.ignored}
    own = dataclasses.replace(
        found,
        changes=[c for c in found.changes if c.path not in touched and c.old_path not in touched],
        ignored=[c for c in found.ignored if c.path not in own_ignored],
    )
    live, gone = [own], []
    for worker in workers:
        kept, undone = _split(worker, inner, done)
        live += kept
        gone += undone
    return live, gone


def _has_undone(
    found: AgentChanges, inner: dict[str, list[AgentChanges]], done: dict[str, float]
) -> bool:
    return found.key in done or any(_has_undone(w, inner, done) for w in inner.get(found.key, []))


def _ended(agent_id: str, end: ChangeSet | Merge) -> AgentChanges:
    """What an agent that ended changed, as its change set (or merge) says."""
    from workers.changes.change_sets import Change
    from workers.changes.ignored_changes import IgnoredChange

    ignored = end.ignored if isinstance(end, ChangeSet) else None
    try:
        changes = [Change.from_json(f) for f in end.files or []]
        kept = [IgnoredChange.from_json(f) for f in ignored or []]
    except (KeyError, TypeError, ValueError) as error:
        raise NoChanges(f"{agent_id}'s change set in the log is damaged ({error})") from None
    return AgentChanges(agent_id, changes, finished=True, ignored=kept)


def _pair_ends(lines: list[Line]) -> dict[int, ChangeSet]:
    """Each agent start's line (by id()) with the change set that ended it: the next one
    of the same agent in the log (a chat's top agent starts once per turn, maybe from
    the same snapshot)."""
    open_starts: dict[str, list[Line]] = {}
    pairs: dict[int, ChangeSet] = {}
    for line in lines:
        match line.event:
            case AgentStart(snapshot=str() as snapshot) if snapshot:
                open_starts.setdefault(line.agent_id, []).append(line)
            case ChangeSet() as change_set if open_starts.get(line.agent_id):
                pairs[id(open_starts[line.agent_id].pop(0))] = change_set
    return pairs


def _editor_above(agent: str, parents: dict[str, str | None], editors: set[str]) -> str | None:
    """The nearest agent above `agent` that could change files, if any."""
    seen = set()
    parent = parents.get(agent)
    while parent is not None and parent not in seen:
        if parent in editors:
            return parent
        seen.add(parent)
        parent = parents.get(parent)
    return None


def changes_of_run(log: Path, here: Path, agent: str | None = None) -> RunChanges:
    """The change sets of the run logged in `log`, which must have worked in the workspace
    `here` (NoChanges otherwise, in one line)."""
    from supervisor import runlog
    from workers.changes.snapshots import Store

    try:
        records = runlog.read_records(log)
    except runlog.RunUnreadable as error:
        raise NoChanges(str(error)) from None
    workspace = next((s.workspace for _, s in of_type(lines_of(records), SessionStart)), None)
    if not workspace or os.path.realpath(workspace) != os.path.realpath(here):
        # A log is data: one that names another folder is not this workspace's to act on.
        raise NoChanges(f"that run worked in {workspace or 'an unknown folder'}, not here ({here})")
    try:
        store = Store(here)
    except OSError as error:  # gaffer's state folder cannot be used
        raise NoChanges(str(error)) from None
    return agent_changes(records, store, agent)
