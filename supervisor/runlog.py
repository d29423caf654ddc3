"""Reading run logs back: list runs, show one as readable steps, total its costs."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from workers.log.reader import RunUnreadable as RunUnreadable
from workers.log.reader import read_raw

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
            records = read_records(path)
        except RunUnreadable:
            runs.append(RunSummary(path.stem, path, "?", "newer format", "", None, None))
            continue
        start = next((r for r in records if r.get("event") == "session_start"), {})
        end = next((r for r in reversed(records) if r.get("event") == "session_end"), None)
        runs.append(
            RunSummary(
                run_id=path.stem,
                path=path,
                started=str(start.get("ts", "?"))[:19].replace("T", " "),
                status=end["status"] if end else "interrupted",
                task=str(start.get("task", "")),
                tokens=end.get("tokens") if end else None,
                elapsed_s=end.get("elapsed_s") if end else None,
            )
        )
    return runs


def find_run(log_dir: Path, ref: str, *, exclude: str | None = None) -> Path:
    """A run by file path, id, unique id prefix, or `last` (never the `exclude` run)."""
    as_path = Path(ref)
    if as_path.suffix == ".jsonl" and as_path.is_file():
        return as_path
    runs = sorted(p for p in log_dir.glob("*.jsonl") if p.stem != exclude)
    if ref == "last":
        if not runs:
            raise RunNotFound(f"no runs in {log_dir}")
        return runs[-1]
    matches = [p for p in runs if p.stem.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunNotFound(f"no run {ref!r} in {log_dir}; `gaffer logs` lists them")
    raise RunNotFound(f"{ref!r} matches {len(matches)} runs; give more of the id")


def render(records: list[Record]) -> list[Text]:
    """The run as a tree: each agent's steps, and under each delegation the worker's own."""
    by_agent: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_agent[str(record.get("agent_id", "?"))].append(record)
    lines: list[Text] = []

    def walk(agent_id: str, depth: int, seen: set[str]) -> None:
        seen.add(agent_id)
        for record in by_agent.get(agent_id, []):
            line = _render_one(record)
            if line is not None:
                lines.append(Text("  " * depth) + line)
            child = record.get("child_id")
            if (
                record.get("event") == "delegate_start"
                and isinstance(child, str)
                and child not in seen
            ):
                walk(child, depth + 1, seen)

    seen: set[str] = set()
    for agent_id, agent_records in by_agent.items():
        if agent_id not in seen and not any("parent_id" in r for r in agent_records):
            walk(agent_id, 0, seen)
    for agent_id in by_agent:  # workers whose delegate_start line was lost
        if agent_id not in seen:
            walk(agent_id, 1, seen)
    return lines


def _render_one(r: Record) -> Text | None:
    event, step = r.get("event"), r.get("step", "?")
    match event:
        case "session_start":
            return Text(
                f"run {r.get('session_id')} · {r.get('model')} · {r.get('workspace')}\n",
                style="bold",
            ) + Text(f"task: {r.get('task')}")
        case "agent_start":
            who = r.get("profile") or r.get("agent_id")
            return Text(
                f"▶ {who} ({r.get('agent_id')}) · tools: {', '.join(r.get('tools', []))}",
                style="bold",
            )
        case "llm_call":
            text = f"[step {step}] model: {r.get('prompt_tokens')} in / {r.get('completion_tokens')} out, {r.get('elapsed_s')}s"
            if r.get("attempt", 1) > 1:
                text += f" (attempt {r['attempt']})"
            return Text(text, style="dim")
        case "llm_retry":
            return Text(
                f"[step {step}] retry after attempt {r.get('attempt')}: {r.get('error')} (wait {r.get('wait_s')}s)",
                style="yellow",
            )
        case "tool_call":
            line = Text(f"[step {step}] ") + Text(str(r.get("name")), style="cyan")
            if r.get("label"):
                line += Text(f" {r['label']}")
            line += Text(" → ") + Text(
                str(r.get("summary") or ""), style="red" if r.get("is_error") else "green"
            )
            return line + Text(f" ({r.get('elapsed_s')}s)", style="dim")
        case "limit":
            return Text(f"stopped: {r.get('limit')} limit: {r.get('detail')}", style="yellow")
        case "delegate_start":
            return Text(f"→ {r.get('child_id')} ", style="bold") + Text(
                f"{r.get('child_profile')}: {r.get('task')}", style="magenta"
            )
        case "delegate_end":
            return Text(
                f"← {r.get('child_id')} {r.get('status')} · {r.get('steps')} steps · {r.get('tokens')} tok · "
                f"{r.get('elapsed_s')}s · files changed: {', '.join(r.get('files_changed') or []) or 'none'}",
                style="bold",
            )
        case "change_set":
            files = [_change_label(f) for f in r.get("files") or [] if isinstance(f, dict)]
            line = Text(f"✎ {r.get('agent_id')} changed: " + (", ".join(files) or "nothing"))
            if r.get("diff_file"):
                line += Text(f" · diff: {r['diff_file']}", style="dim")
            return line
        case "agent_end":
            line = Text(
                f"■ {r.get('agent_id')}: {r.get('status')} after {r.get('steps')} steps, {r.get('tokens')} tokens",
                style="bold",
            )
            if r.get("answer"):
                line += Text("\n" + str(r["answer"]).strip())
            return line
        case "session_end":
            return Text(
                f"run {r.get('status')}: {r.get('reason')} · {r.get('tokens')} tokens · "
                f"{r.get('tool_calls')} tool calls · {r.get('elapsed_s')}s",
                style="bold",
            )
    return None


def _change_label(change: Record) -> str:
    if change.get("change") == "renamed":
        return f"{change.get('old_path')} → {change.get('path')} (renamed)"
    return f"{change.get('path')} ({change.get('change')})"


def _interval(record: Record) -> tuple[float, float]:
    """When a call ran: it is logged as it ends, with how long it took."""
    try:
        end = datetime.fromisoformat(str(record["ts"])).timestamp()
    except (KeyError, ValueError):
        return (0.0, 0.0)
    return (end - float(record.get("elapsed_s") or 0.0), end)


def _covered(intervals: list[tuple[float, float]]) -> float:
    """Seconds during which at least one of the intervals ran: calls that overlap (a
    batch of workers) count once, so an agent is never busier than the run is long."""
    total, reached = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reached:
            total += end - max(start, reached)
            reached = end
    return total


def stats(records: list[Record]) -> list[Table]:
    """Tokens, time and tool calls: per agent, and per tool."""
    agents: dict[str, Counter[str]] = defaultdict(Counter)
    profiles: dict[str, str] = {}
    busy: dict[str, list[tuple[float, float]]] = defaultdict(list)
    tools: dict[str, Counter[str]] = defaultdict(Counter)
    tool_time: dict[str, float] = defaultdict(float)
    for r in records:
        agent = str(r.get("agent_id", "?"))
        if "profile" in r:
            profiles.setdefault(agent, str(r["profile"]))
        if r.get("event") == "llm_call":
            agents[agent]["llm_calls"] += 1
            agents[agent]["prompt_tokens"] += r.get("prompt_tokens", 0)
            agents[agent]["cached_tokens"] += r.get("cached_tokens") or 0
            agents[agent]["completion_tokens"] += r.get("completion_tokens", 0)
            agents[agent]["reasoning_tokens"] += r.get("reasoning_tokens") or 0
            busy[agent].append(_interval(r))
        elif r.get("event") == "llm_retry":
            agents[agent]["retries"] += 1
        elif r.get("event") == "tool_call":
            name = str(r.get("name"))
            agents[agent]["tool_calls"] += 1
            tools[name]["calls"] += 1
            tools[name]["errors"] += int(bool(r.get("is_error")))
            tool_time[name] += r.get("elapsed_s", 0.0)
            busy[agent].append(_interval(r))
    # Reasoning tokens (part of the completion tokens) only when a model reported some.
    reasoned = any(c["reasoning_tokens"] for c in agents.values())
    per_agent = Table(title="per agent")
    for column in (
        "agent",
        "llm calls",
        "retries",
        "prompt tok",
        "cached tok",
        "completion tok",
        *(["of which reasoning"] if reasoned else []),
        "tool calls",
        "busy s",
    ):
        per_agent.add_column(column, justify="left" if column == "agent" else "right")
    for agent, c in agents.items():
        per_agent.add_row(
            agent,
            str(c["llm_calls"]),
            str(c["retries"]),
            str(c["prompt_tokens"]),
            str(c["cached_tokens"]),
            str(c["completion_tokens"]),
            *([str(c["reasoning_tokens"])] if reasoned else []),
            str(c["tool_calls"]),
            f"{_covered(busy[agent]):.2f}",
        )
    per_tool = Table(title="per tool")
    for column in ("tool", "calls", "errors", "total s"):
        per_tool.add_column(column, justify="left" if column == "tool" else "right")
    for name, c in sorted(tools.items()):
        per_tool.add_row(name, str(c["calls"]), str(c["errors"]), f"{tool_time[name]:.3f}")
    end = next((r for r in reversed(records) if r.get("event") == "session_end"), None)
    total = Table(title="run")
    total.add_column("status")
    total.add_column("tokens", justify="right")
    total.add_column("tool calls", justify="right")
    total.add_column("wall s", justify="right")
    if end:
        total.add_row(
            str(end.get("status")),
            str(end.get("tokens")),
            str(end.get("tool_calls")),
            str(end.get("elapsed_s")),
        )
    else:
        total.add_row("interrupted", "?", "?", "?")
    return [total, per_agent, per_tool]
