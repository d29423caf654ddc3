"""Reading run logs back: list runs, show one as readable steps, total its costs."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.text import Text

from workers.log.reader import Line, lines_of, of_type, read_lines, read_raw
from workers.log.reader import RunUnreadable as RunUnreadable
from workers.log.schema import (
    AgentEnd,
    AgentStart,
    ChangeSet,
    CheckChosen,
    CheckRan,
    DelegateEnd,
    DelegateStart,
    Event,
    Limit,
    LlmCall,
    LlmRetry,
    Merge,
    SessionEnd,
    SessionStart,
    ToolCalled,
)

Record = dict[str, Any]


class RunNotFound(Exception):
    pass


def read_records(path: Path) -> list[Record]:
    """Every whole line as written (workers/log/reader.py: read_raw)."""
    return read_raw(path)


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    path: Path
    started: str
    status: str
    task: str
    tokens: int | None
    elapsed_s: float | None


def list_runs(log_dir: Path) -> list[RunSummary]:
    runs = []
    for path in sorted(log_dir.glob("*.jsonl")):
        try:
            lines = read_lines(path)
        except RunUnreadable:
            runs.append(RunSummary(path.stem, path, "?", "newer format", "", None, None))
            continue
        start = next(iter(of_type(lines, SessionStart)), None)
        end = next(reversed(of_type(lines, SessionEnd)), None)
        runs.append(
            RunSummary(
                run_id=path.stem,
                path=path,
                started=_when(start[0]) if start else "?",
                status=status_with_exit(end[1]) if end else "interrupted",
                task=start[1].task if start else "",
                tokens=end[1].tokens if end else None,
                elapsed_s=end[1].elapsed_s if end else None,
            )
        )
    return runs


def _when(line: Line) -> str:
    return datetime.fromtimestamp(line.ts, UTC).strftime("%Y-%m-%d %H:%M:%S") if line.ts else "?"


def find_run(
    log_dir: Path, ref: str, *, exclude: str | None = None, to_resume: bool = False
) -> Path:
    """A run by file path, id, unique id prefix, or `last` (never the `exclude` run;
    `to_resume`: the last that got as far as a model call, since one that failed to
    start has no conversation to go on with)."""
    as_path = Path(ref)
    if as_path.suffix == ".jsonl" and as_path.is_file():
        return as_path
    runs = sorted(p for p in log_dir.glob("*.jsonl") if p.stem != exclude)
    if ref == "last":
        going = [p for p in runs if _got_going(p)] if to_resume else runs
        if not going:
            raise RunNotFound(
                f"no run in {log_dir} got as far as a model call"
                if runs
                else f"no runs in {log_dir}"
            )
        return _newest(going)
    matches = [p for p in runs if p.stem.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunNotFound(f"no run {ref!r} in {log_dir}; `gaffer logs` lists them")
    raise RunNotFound(f"{ref!r} matches {len(matches)} runs; give more of the id")


def _newest(runs: list[Path]) -> Path:
    """The run started last: by the second in its id, then, for runs started in the same
    second (their ids end in random letters), by the time of their first line."""
    second = max(p.stem[:15] for p in runs)
    same = [p for p in runs if p.stem[:15] == second]
    return max(same, key=_first_ts) if len(same) > 1 else same[0]


def _first_ts(path: Path) -> str:
    """The first line's time (ISO 8601 in UTC, so it sorts as text); "" when unreadable."""
    try:
        with path.open("rb") as f:
            ts = json.loads(f.readline(64 * 1024)).get("ts")
    except (OSError, ValueError, AttributeError):
        return ""
    return ts if isinstance(ts, str) else ""


def _got_going(path: Path) -> bool:
    """Whether the run made a model call; read line by line, never whole."""
    try:
        with path.open("rb") as f:
            return any(b'"event": "llm_call"' in line for line in f)
    except OSError:
        return False


def render(records: list[Record], cost: str = "") -> list[Text]:
    """The run as a tree: each agent's steps, and under each delegation the worker's own;
    `cost`: what the run cost, said on its last line."""
    by_agent: dict[str, list[Line]] = defaultdict(list)
    editors: set[str] = set()
    for line in lines_of(records):
        by_agent[line.agent_id or "?"].append(line)
        if isinstance(line.event, AgentStart) and EDITING_TOOLS & set(line.event.tools):
            editors.add(line.agent_id or "?")
    shown: list[Text] = []

    def walk(agent_id: str, depth: int, seen: set[str]) -> None:
        seen.add(agent_id)
        for line in by_agent.get(agent_id, []):
            text = _line_text(line, agent_id in editors, cost)
            if text is not None:
                shown.append(Text("  " * depth) + text)
            if isinstance(line.event, DelegateStart) and line.event.child_id not in seen:
                walk(line.event.child_id, depth + 1, seen)

    seen: set[str] = set()
    for agent_id, lines in by_agent.items():
        if agent_id not in seen and all(line.parent_id is None for line in lines):
            walk(agent_id, 0, seen)
    for agent_id in by_agent:  # workers whose delegate_start line was lost
        if agent_id not in seen:
            walk(agent_id, 1, seen)
    return shown


def _line_text(line: Line, edits: bool, cost: str) -> Text | None:
    """One line of the tree; a change set of an agent that `edits` nothing itself, as
    its workers'; the run's end with its `cost`."""
    if isinstance(line.event, ChangeSet) and not edits:
        return _changed_through_workers(line, line.event)
    text = _render_one(line)
    if text is not None and cost and isinstance(line.event, SessionEnd):
        text += Text(f" · {cost}", style="bold")
    return text


EDITING_TOOLS = {"write_file", "edit_file", "run_shell"}
"""An agent with none of these changes nothing itself: what changed under it, its
workers changed."""


def _changed_through_workers(line: Line, event: ChangeSet) -> Text:
    files = [_change_label(f) for f in event.files if isinstance(f, dict)]
    return Text(
        f"✎ changed under {line.agent_id}, by its workers: " + (", ".join(files) or "nothing")
    )


def _merge_line(line: Line, event: Merge) -> Text:
    """How an isolated editor's change set came into the workspace, or why not."""
    where = f" on {line.node}" if line.node else ""
    if event.status == "conflict":
        paths = [str(c.get("path")) for c in event.conflicts if isinstance(c, dict)]
        return Text(
            f"⇄ {line.agent_id}{where}: NOT applied, conflicts in " + ", ".join(paths),
            style="bold red",
        )
    files = [_change_label(f) for f in event.files if isinstance(f, dict)]
    said = f"⇄ {line.agent_id}{where}: {event.status}"
    if files:
        said += ": " + ", ".join(files)
    if event.reason:
        said += f" ({event.reason})"
    return Text(said, style="yellow" if event.status == "skipped" else "")


def _render_one(line: Line) -> Text | None:
    """One line of `gaffer logs`: the run, its agents and workers, and their steps."""
    match line.event:
        case SessionStart() as e:
            return Text(
                f"run {line.session_id} · {e.model} · {e.workspace}\n", style="bold"
            ) + Text(f"task: {e.task}")
        case AgentStart() as e:
            who = line.profile or line.agent_id
            return Text(f"▶ {who} ({line.agent_id}) · tools: {', '.join(e.tools)}", style="bold")
        case DelegateStart() as e:
            return Text(f"→ {e.child_id} ", style="bold") + Text(
                f"{e.child_profile}: {e.task}", style="magenta"
            )
        case DelegateEnd() as e:
            return Text(
                f"← {e.child_id} {e.status} · {e.steps} steps · {e.tokens} tok · "
                f"{e.elapsed_s}s · files changed: {', '.join(e.files_changed) or 'none'}",
                style="bold",
            )
        case ChangeSet() as e:
            files = [_change_label(f) for f in e.files if isinstance(f, dict)]
            shown = Text(f"✎ {line.agent_id} changed: " + (", ".join(files) or "nothing"))
            if e.diff_file:
                shown += Text(f" · diff: {e.diff_file}", style="dim")
            return shown
        case Merge() as e:
            return _merge_line(line, e)
        case AgentEnd() as e:
            shown = Text(
                f"■ {line.agent_id}: {e.status} after {e.steps} steps, {e.tokens} tokens",
                style="bold",
            )
            if e.answer:
                shown += Text("\n" + e.answer.strip())
            return shown
        case SessionEnd() as e:
            return Text(
                f"run {status_with_exit(e)}: {e.reason} · {e.tokens} tokens · "
                f"{e.tool_calls} tool calls · {e.elapsed_s}s",
                style="bold",
            )
    return _render_step(line.event)


def _render_step(event: Event) -> Text | None:
    """A step's line: a model call, a retry, a tool call, a limit."""
    match event:
        case LlmCall() as e:
            text = f"[step {e.step}] model: {e.prompt_tokens} in / {e.completion_tokens} out, {e.elapsed_s}s"
            if e.attempt > 1:
                text += f" (attempt {e.attempt})"
            if e.varied:
                text += f", sampled away from {e.varied} bad repl{'y' if e.varied == 1 else 'ies'}"
            if e.same_as is not None:
                text += f"; the same reply as step {e.same_as}"
            if e.runaway:
                text += f"; ended in a loop: {e.runaway}"
            return Text(text, style="dim")
        case LlmRetry() as e:
            return Text(
                f"[step {e.step}] retry after attempt {e.attempt}: {e.error} (wait {e.wait_s}s)",
                style="yellow",
            )
        case ToolCalled() as e:
            shown = Text(f"[step {e.step}] ") + Text(e.name, style="cyan")
            if e.label:
                shown += Text(f" {e.label}")
            shown += Text(" → ") + Text(e.summary or "", style="red" if e.is_error else "green")
            return shown + Text(f" ({e.elapsed_s}s)", style="dim")
        case Limit() as e:
            return Text(f"stopped: {e.limit} limit: {e.detail}", style="yellow")
        case CheckChosen() as e:
            return Text(e.line, style="dim")
        case CheckRan() as e:
            style = {"verified": "green", "unchecked": "yellow"}.get(e.verdict, "red")
            again = " (unchanged since the last: not run again)" if e.reused else ""
            return Text("check ", style="bold") + Text(e.line + again, style=style)
    return None


def _change_label(change: Record) -> str:
    """A change of a change set's `files`, as Change.as_json wrote it."""
    if change.get("change") == "renamed":
        return f"{change.get('old_path')} → {change.get('path')} (renamed)"
    return f"{change.get('path')} ({change.get('change')})"


def status_with_exit(end: SessionEnd) -> str:
    """The run's status with what `gaffer run` exited with, where the log has it."""
    return end.status if end.exit_code is None else f"{end.status} (exit {end.exit_code})"
