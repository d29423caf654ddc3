"""`gaffer diff`, `gaffer undo` and `gaffer redo`: a run's change sets
(supervisor/run_changes.py) shown as a unified diff, or put back file by file (shown
first, then asked), for the whole run or one agent. What was undone is kept in gaffer's
state folder (workers/changes/undone.py): the diff marks it, a later undo skips it, and
redo takes the last undo back.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from supervisor.exits import EXIT_ERROR, fail, log_dir_here
from supervisor.run_changes import AgentChanges, NoChanges, RunChanges, changes_of_run, in_effect
from supervisor.terminal import confirm, echo, visible
from workers.tools.git_paths import workspace_for

if TYPE_CHECKING:
    from workers.changes.ignored_changes import IgnoredChange
    from workers.changes.undo import FileUndo, Plan


def undone_so_far(run: RunChanges) -> dict[str, float]:
    """The record of undos of this workspace; NoChanges when it cannot be read."""
    from workers.changes.undone import undone

    try:
        return undone(run.store)
    except OSError as error:
        raise NoChanges(f"cannot read gaffer's record of undos: {error}") from None


def refused_by_undo(run: RunChanges, gone: list[AgentChanges]) -> set[str]:
    """Paths undo refused (left in effect) in the change sets `gone` it marked undone."""
    from workers.changes.undone import refused_paths

    try:
        refused = refused_paths(run.store)
    except OSError:
        return set()  # the record could not be read: undone_so_far says so
    return {path for found in gone for path in refused.get(found.key, [])}


def diff_text(run: RunChanges) -> tuple[str, list[str]]:
    """The unified diff of what is still in effect, then what was undone, every line of it
    behind `# ` (so the whole stays a patch `git apply` takes); and notes for the user."""
    from workers.changes.change_sets import combine, quoted, unified_diff
    from workers.changes.ignored_changes import section

    store = run.store
    when = undone_so_far(run)
    live, gone = in_effect(run, when)
    notes = [
        f"{f.agent_id} never ended: shown is what changed since it started"
        for f in live
        if not f.finished
    ]
    # What undo refused in a change set it marked undone is still in effect: shown so.
    held = refused_by_undo(run, gone)
    gone_changes = combine([f.changes for f in gone])
    live_changes = [
        *combine([f.changes for f in live]),
        *(c for c in gone_changes if c.path in held),
    ]
    text = unified_diff(store, live_changes)
    text += section([c for f in live for c in f.ignored])
    if gone:
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(max(when[f.key] for f in gone)))
        who = ", ".join(sorted({quoted("", f.agent_id) for f in gone}))  # a log's ids are data
        notes.append(f"{who}: undone at {at}; shown last, each line behind '# '")
        text += f"# UNDONE at {at} (gaffer undo), no longer in the workspace: {who}\n"
        undone_diff = unified_diff(store, [c for c in gone_changes if c.path not in held])
        text += "".join(f"# {line}\n" for line in undone_diff.split("\n")[:-1])
    return text, notes


@dataclass(frozen=True)
class UndoPlan:
    """What undoing a run's change sets still in effect will do, before it is done."""

    pending: list[AgentChanges]
    plan: Plan | None
    ignored: list[IgnoredChange]

    def shown(self) -> list[str]:
        """One line per file: what will be done, or why it will not."""
        from workers.changes.change_sets import quoted

        steps = self.plan.steps if self.plan else []
        lines = [s.shown for s in steps if s.action != "skip"]
        lines += [f"move back {quoted('', n)} → {quoted('', o)}" for n, o in self.moves.items()]
        return lines + [f"remove {c.label} (git-ignored, added by the run)" for c in self.added]

    @property
    def moves(self) -> dict[str, str]:
        """Ignored files the run moved (added where one was deleted, the same file)."""
        from workers.changes.undo import ignored_moves

        return ignored_moves(self.ignored)

    @property
    def added(self) -> list[IgnoredChange]:
        return [c for c in self.ignored if c.kind == "added" and c.path not in self.moves]

    @property
    def count(self) -> int:
        """How many files will be undone."""
        return len(self.plan.acting if self.plan else []) + len(self.moves) + len(self.added)


def plan_undo(run: RunChanges) -> UndoPlan:
    """What undoing every change set of `run` not undone already will do, file by file;
    NoChanges when there is nothing to undo."""
    from workers.changes.change_sets import combine
    from workers.changes.undo import CannotUndo, plan

    pending, _ = in_effect(run, undone_so_far(run))
    if not pending:
        raise NoChanges("nothing to undo: it was all undone already (`gaffer diff` shows it)")
    changes = combine([f.changes for f in pending])
    ignored = [c for f in pending for c in f.ignored]
    try:
        planned = plan(run.store, changes) if changes else None
    except CannotUndo as error:
        raise NoChanges(f"nothing undone: {error}") from None
    return UndoPlan(pending, planned, ignored)


def apply_undo(run: RunChanges, planned: UndoPlan) -> list[str]:
    """Do what `planned` says and record it for `gaffer diff` and `gaffer redo`; what was
    done and refused, a line each. NoChanges (nothing changed) when it cannot be done."""
    from workers.changes.ignored_changes import undo_added
    from workers.changes.undo import CannotUndo, apply, move_back
    from workers.changes.undone import mark_undone

    store = run.store
    if planned.plan is None and not planned.ignored:
        return ["nothing to undo: no file was changed"]
    steps = planned.plan.acting if planned.plan else []
    refused = [f"not undone: {s.shown}" for s in (planned.plan.refused if planned.plan else [])]
    if refused and not steps and not planned.added and not planned.moves:
        raise NoChanges("nothing undone: " + "; ".join(refused))
    try:
        files = apply(store, planned.plan) if planned.plan else []
    except CannotUndo as error:
        raise NoChanges(f"nothing undone: {error}") from None
    moves = planned.moves
    moved = [
        move_back(store.workspace, c, moves[c.path]) for c in planned.ignored if c.path in moves
    ]
    rest = [c for c in planned.ignored if c.path not in moves and c.path not in moves.values()]
    removed, left = undo_added(store.workspace, rest)
    try:
        refusals = planned.plan.refused if planned.plan else []
        paths = [p for r in refusals for p in (r.change.path, r.change.old_path) if p]
        mark_undone(store, [f.key for f in planned.pending], files, paths)
    except OSError as error:  # done, but a later diff will not know it
        left.append(f"the record of undos (gaffer diff will not mark this one): {error}")
    return [
        *(f"removed: {path} (git-ignored, added by the run)" for path in removed),
        *(f"not put back: {why}" for why in left),
        *moved,
        *(f"undone: {s.change.label}" for s in steps),
        *refused,
    ]


def put_back(run: RunChanges) -> list[str]:
    """Undo every change set of `run` not undone already, file by file, at once (the
    chat's `/undo`: the user asked for it there); what was done and refused, a line each."""
    return apply_undo(run, plan_undo(run))


def plan_redo(run: RunChanges) -> tuple[str, list[FileUndo], list[str]]:
    """The last undo not taken back yet: its id, the files redo would write, and those
    it refuses, a line each. NoChanges when there is none."""
    from workers.changes.undo import plan_redo as files_to_redo
    from workers.changes.undone import last_undo

    try:
        last = last_undo(run.store)
    except OSError as error:
        raise NoChanges(f"cannot read gaffer's record of undos: {error}") from None
    if last is None:
        raise NoChanges("nothing to redo: no undo in this workspace has files to put back")
    undo_id, files = last
    acting, refused = files_to_redo(run.store, files)
    return undo_id, acting, refused


def apply_redo(run: RunChanges, undo_id: str, files: list[FileUndo]) -> list[str]:
    """Write `files` back as that undo found them and mark it redone."""
    from workers.changes.change_sets import quoted
    from workers.changes.undo import CannotUndo, write_back
    from workers.changes.undone import mark_redone

    try:
        write_back(run.store, files)
    except CannotUndo as error:
        raise NoChanges(f"nothing redone: {error}") from None
    said = [f"redone: {quoted('', f.path)}" for f in files]
    try:
        mark_redone(run.store, undo_id)
    except OSError as error:
        said.append(f"the record of undos (gaffer diff still marks it undone): {error}")
    return said


def stdin_is_terminal() -> bool:
    """Whether a person can answer (a test stands in for one here)."""
    return sys.stdin.isatty()


def go_ahead(lines: list[str], question: str, yes: bool) -> bool:
    """Show what will be done; then whether to do it: --yes, or the user's answer at a
    terminal. Piped without --yes, nothing is done and the CLI exits EXIT_ERROR."""
    for line in lines:
        echo(line)
    if yes:
        return True
    if not stdin_is_terminal():
        fail("nothing done: stdin is not a terminal; add --yes to do the above")
    return confirm(question)


def _found(run_ref: str, log_dir: Path | None, agent: str | None) -> RunChanges:
    from supervisor import runlog

    try:
        return changes_of_run(
            runlog.find_run(log_dir_here(log_dir), run_ref), workspace_for(Path.cwd()), agent
        )
    except (runlog.RunNotFound, NoChanges) as error:
        fail(str(error))


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
    """What RUN (default: the last) changed in the workspace, as a unified diff; what was
    undone since comes last, marked, each line behind `# `."""
    try:
        text, notes = diff_text(_found(run_ref, log_dir, agent))
    except NoChanges as error:
        fail(str(error))
    for note in notes:
        echo(f"gaffer: {note}", err=True)
    terminal = sys.stdout.isatty()
    colour = terminal and not os.environ.get("NO_COLOR")
    out = sys.stdout.buffer
    for line in text.split("\n")[:-1] if text else []:
        # On a terminal, what a file holds is shown, never sent; to a pipe, bytes as they are.
        shown = visible(line) if terminal else line
        shown = coloured(shown) if colour else shown
        # Content and names are bytes as they were: never an encoding error on the way out.
        out.write(shown.encode("utf-8", "surrogateescape") + b"\n")
    out.flush()


# How each kind of diff line is shown on a terminal, first match wins.
DIFF_STYLES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("# ",), "dim"),
    (("+++", "---", "diff --git"), "bold"),
    (("@@",), "cyan"),
    (("+",), "green"),
    (("-",), "red"),
)


def diff_style(line: str) -> str | None:
    """The style of a diff line (a rich style name, and a click one), or None."""
    return next((style for starts, style in DIFF_STYLES if line.startswith(starts)), None)


def coloured(line: str) -> str:
    style = diff_style(line)
    if style in ("dim", "bold"):
        return click.style(line, **{style: True})
    return click.style(line, fg=style) if style else line


_YES = click.option("--yes", is_flag=True, help="Do it without asking (needed in a pipe).")


@click.command()
@_RUN
@_AGENT
@_LOG_DIR
@_YES
def undo(run_ref: str, agent: str | None, log_dir: Path | None, yes: bool) -> None:
    """Put back what RUN (default: the last) changed, or one agent's part of it, file by
    file: shown first, then asked (--yes: not asked). A file someone else changed too, or
    changed since on the agent's own lines, is refused. Parts undone already are skipped."""
    run = _found(run_ref, log_dir, agent)
    try:
        planned = plan_undo(run)
        question = f"Undo these {planned.count} files?"
        if planned.count and not go_ahead(planned.shown(), question, yes):
            fail("nothing undone")
        said = apply_undo(run, planned)
    except NoChanges as error:
        fail(str(error), EXIT_ERROR)
    for line in said:
        echo(line)


@click.command()
@_RUN
@_LOG_DIR
@_YES
def redo(run_ref: str, log_dir: Path | None, yes: bool) -> None:
    """Put back what the last undo in this workspace took away, each file still as the
    undo left it; shown first, then asked (--yes: not asked)."""
    from workers.changes.change_sets import quoted

    run = _found(run_ref, log_dir, None)
    try:
        undo_id, files, refused = plan_redo(run)
        if not files:
            raise NoChanges("nothing redone: " + "; ".join(refused))
        shown = [f"put back {quoted('', f.path)}" for f in files] + refused
        if not go_ahead(shown, f"Redo these {len(files)} files?", yes):
            fail("nothing redone")
        said = apply_redo(run, undo_id, files)
    except NoChanges as error:
        fail(str(error), EXIT_ERROR)
    for line in [*said, *(f"not redone: {r}" for r in refused)]:
        echo(line)
