"""`gaffer diff` and `gaffer undo`: a run's change sets (supervisor/run_changes.py)
shown as a unified diff or put back, for the whole run or one agent. What was undone is
kept in gaffer's state folder (workers/changes/undone.py): the diff marks it, and a later
undo skips it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import click

from supervisor.exits import EXIT_ERROR, fail, log_dir_here
from supervisor.run_changes import NoChanges, RunChanges, changes_of_run, in_effect
from supervisor.terminal import echo, visible
from workers.tools.git_paths import workspace_for


def undone_so_far(run: RunChanges) -> dict[str, float]:
    """The record of undos of this workspace; NoChanges when it cannot be read."""
    from workers.changes.undone import undone

    try:
        return undone(run.store)
    except OSError as error:
        raise NoChanges(f"cannot read gaffer's record of undos: {error}") from None


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
    text = unified_diff(store, combine([f.changes for f in live]))
    text += section([c for f in live for c in f.ignored])
    if gone:
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(max(when[f.key] for f in gone)))
        who = ", ".join(sorted({quoted("", f.agent_id) for f in gone}))  # a log's ids are data
        notes.append(f"{who}: undone at {at}; shown last, each line behind '# '")
        text += f"# UNDONE at {at} (gaffer undo), no longer in the workspace: {who}\n"
        undone_diff = unified_diff(store, combine([f.changes for f in gone]))
        text += "".join(f"# {line}\n" for line in undone_diff.split("\n")[:-1])
    return text, notes


def put_back(run: RunChanges) -> list[str]:
    """Undo every change set of `run` not undone already, all or nothing; what was done,
    a line each. NoChanges (nothing changed) when it cannot be done."""
    from workers.changes.change_sets import combine
    from workers.changes.ignored_changes import undo_added
    from workers.changes.undo import CannotUndo, undo
    from workers.changes.undone import mark_undone

    store = run.store
    pending, _ = in_effect(run, undone_so_far(run))
    if not pending:
        raise NoChanges("nothing to undo: it was all undone already (`gaffer diff` shows it)")
    changes = combine([f.changes for f in pending])
    ignored = [c for f in pending for c in f.ignored]
    if not changes and not ignored:
        return ["nothing to undo: no file was changed"]
    try:
        done = [f"undone: {label}" for label in (undo(store, changes) if changes else [])]
    except CannotUndo as error:
        raise NoChanges(f"nothing undone: {error}") from None
    removed, left = undo_added(store.workspace, ignored)
    try:
        mark_undone(store, [f.key for f in pending])
    except OSError as error:  # done, but a later diff will not know it
        left.append(f"the record of undos (gaffer diff will not mark this one): {error}")
    return [
        *(f"removed: {path} (git-ignored, added by the run)" for path in removed),
        *(f"not put back: {why}" for why in left),
        *done,
    ]


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


@click.command()
@_RUN
@_AGENT
@_LOG_DIR
def undo(run_ref: str, agent: str | None, log_dir: Path | None) -> None:
    """Put back what RUN (default: the last) changed, or one agent's part of it: all of
    it, or nothing when a file has changed since. Parts undone already are skipped."""
    run = _found(run_ref, log_dir, agent)
    try:
        said = put_back(run)
    except NoChanges as error:
        fail(str(error), EXIT_ERROR)
    for line in said:
        echo(line)
