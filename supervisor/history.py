"""`gaffer diff` and `gaffer undo`: a run's change sets read back from its log, shown as a
unified diff or put back, for the whole run or one agent.

A run's change is its outermost editing agents' change sets, one after another (an
editor's own workers are inside its change set). An agent the log shows starting from
a snapshot but never ending (a run killed mid-edit) changed what differs between that
snapshot and the workspace now.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from supervisor.exits import EXIT_ERROR, fail, log_dir_here
from supervisor.terminal import echo, visible
from workers.log.reader import Line, lines_of, of_type
from workers.log.schema import AgentStart, ChangeSet, Merge, SessionStart
from workers.tools.git_paths import workspace_for

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


class NoChanges(Exception):
    """What was asked for has no change set: one line for the user."""


def agent_changes(records: list[Record], store: Store, agent: str | None) -> list[AgentChanges]:
    """The change sets of `agent` (each turn of a chat's top agent is one), or of the
    run's outermost editing agents, in the order they started."""
    from workers.changes.change_sets import compare

    lines = lines_of(records)
    # An isolated editor (or one on a cluster node) changed the workspace only through
    # its merge.
    merges = {line.agent_id: merge for line, merge in of_type(lines, Merge)}
    started = of_type(lines, AgentStart)
    starts = [(line, s) for line, s in started if s.snapshot or line.agent_id in merges]
    ends = _pair_ends(lines)
    parents = {line.agent_id: line.parent_id for line, _ in started}
    editors = {line.agent_id for line, _ in starts}
    if agent is not None:
        if agent not in parents:
            raise NoChanges(f"no agent {agent!r} in this run; `gaffer logs RUN` shows its agents")
        if agent not in editors:
            raise NoChanges(f"{agent} could change no files: it has no change set")
        chosen = [(line, s) for line, s in starts if line.agent_id == agent]
    else:
        chosen = [
            (line, s)
            for line, s in starts
            if not _has_editor_above(line.agent_id, parents, editors)
        ]
        if not chosen:
            raise NoChanges("no agent of this run could change files")
    found = []
    for line, start in chosen:
        agent_id = line.agent_id
        end: ChangeSet | Merge | None = ends.get(id(line))
        if start.worktree or agent_id in merges:
            end = merges.get(agent_id) or Merge(status="", files=[], conflicts=[])
        if end is not None:
            found.append(_ended(agent_id, end))
            continue
        try:
            tree = store.tree(str(start.snapshot))
        except KeyError:
            raise NoChanges(
                f"{agent_id} never ended and its starting snapshot is not in {store.folder}"
            ) from None
        found.append(AgentChanges(agent_id, compare(tree, store.scan()), finished=False))
    return found


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


def _has_editor_above(agent: str, parents: dict[str, str | None], editors: set[str]) -> bool:
    seen = set()
    parent = parents.get(agent)
    while parent is not None and parent not in seen:
        if parent in editors:
            return True
        seen.add(parent)
        parent = parents.get(parent)
    return False


def _load(
    run_ref: str, log_dir: Path | None, agent: str | None
) -> tuple[Store, list[AgentChanges]]:
    from supervisor import runlog
    from workers.changes.snapshots import Store

    try:
        records = runlog.read_records(runlog.find_run(log_dir_here(log_dir), run_ref))
    except (runlog.RunNotFound, runlog.RunUnreadable) as error:
        fail(str(error))
    here = workspace_for(Path.cwd())
    workspace = next((s.workspace for _, s in of_type(lines_of(records), SessionStart)), None)
    if not workspace or os.path.realpath(workspace) != str(here):
        # A log is data: one that names another folder is not this workspace's to act on.
        fail(f"that run worked in {workspace or 'an unknown folder'}, not here ({here})")
    try:
        store = Store(here)
    except OSError as error:  # gaffer's state folder cannot be used
        fail(str(error))
    try:
        return store, agent_changes(records, store, agent)
    except NoChanges as error:
        fail(str(error))


def _combined(found: list[AgentChanges]) -> list[Change]:
    from workers.changes.change_sets import combine

    return combine([f.changes for f in found])


_RUN = click.argument("run_ref", default="last")
_AGENT = click.option("--agent", help="Only this agent's change set (`w2`; `supervisor`).")
_LOG_DIR = click.option(
    "--log-dir", type=click.Path(path_type=Path), help="Where run logs are [env GAFFER_LOG_DIR]."
)


@click.command()
@_RUN
@_AGENT
@_LOG_DIR
def diff(run_ref: str, agent: str | None, log_dir: Path | None) -> None:
    """What RUN (default: the last) changed in the workspace, as a unified diff."""
    from workers.changes.change_sets import unified_diff
    from workers.changes.ignored_changes import section

    store, found = _load(run_ref, log_dir, agent)
    for unfinished in (f for f in found if not f.finished):
        echo(
            f"gaffer: {unfinished.agent_id} never ended: shown is what changed since it started",
            err=True,
        )
    text = unified_diff(store, _combined(found))
    text += section([c for f in found for c in f.ignored])
    terminal = sys.stdout.isatty()
    colour = terminal and not os.environ.get("NO_COLOR")
    out = sys.stdout.buffer
    for line in text.split("\n")[:-1] if text else []:
        # On a terminal, what a file holds is shown, never sent; to a pipe, bytes as they are.
        shown = visible(line) if terminal else line
        shown = _coloured(shown) if colour else shown
        # Content and names are bytes as they were: never an encoding error on the way out.
        out.write(shown.encode("utf-8", "surrogateescape") + b"\n")
    out.flush()


def _coloured(line: str) -> str:
    if line.startswith(("+++", "---", "diff --git")):
        return click.style(line, bold=True)
    if line.startswith("@@"):
        return click.style(line, fg="cyan")
    if line.startswith("+"):
        return click.style(line, fg="green")
    if line.startswith("-"):
        return click.style(line, fg="red")
    return line


@click.command()
@_RUN
@_AGENT
@_LOG_DIR
def undo(run_ref: str, agent: str | None, log_dir: Path | None) -> None:
    """Put back what RUN (default: the last) changed, or one agent's part of it: all of
    it, or nothing when a file has changed since."""
    from workers.changes.ignored_changes import undo_added
    from workers.changes.undo import CannotUndo
    from workers.changes.undo import undo as put_back

    store, found = _load(run_ref, log_dir, agent)
    changes = _combined(found)
    ignored = [c for f in found for c in f.ignored]
    if not changes and not ignored:
        echo("nothing to undo: no file was changed")
        return
    try:
        undone = put_back(store, changes) if changes else []
    except CannotUndo as error:
        fail(f"nothing undone: {error}", EXIT_ERROR)
    removed, left = undo_added(store.workspace, ignored)
    for path in removed:
        echo(f"removed: {path} (git-ignored, added by the run)")
    for why in left:
        echo(f"not put back: {why}")
    for label in undone:
        echo(f"undone: {label}")
