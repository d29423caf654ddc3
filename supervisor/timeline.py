"""A run as a timeline, from its jsonl log alone (`gaffer view`): one lane per agent in
tree order, bars for model calls, tool calls, waits for the workspace, retries,
compactions, verdicts and limits; totals per agent and per tool; the critical path.

A run still going, or ended by `kill -9`, has agents and model calls with no end: their
bars run to the log's last line and are marked open (interrupted).
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

Record = dict[str, Any]
# What one bar's detail may carry into the page: enough to read, never a whole log.
MAX_DETAIL_CHARS = 20_000
MAX_DIFF_CHARS = 40_000
WORKER_IN_REPORT = re.compile(r"^worker (\S+) \(")


@dataclass
class Bar:
    id: str
    agent: str
    kind: str
    """model, tool, wait, retry, compaction, verification, limit"""
    start: float
    end: float
    label: str
    error: bool = False
    open: bool = False
    """It never ended in the log: the run was killed, or is still going."""
    detail: dict[str, Any] = field(default_factory=dict)
    child: str | None = None
    """A delegate call's worker."""


@dataclass
class Lane:
    agent: str
    parent: str | None
    profile: str
    depth: int
    start: float
    end: float
    status: str
    reason: str = ""
    open: bool = False
    tokens: int = 0
    model_s: float = 0.0
    tool_s: float = 0.0
    node: str | None = None


@dataclass
class Timeline:
    run_id: str
    task: str
    started: str
    wall_s: float
    status: str
    lanes: list[Lane]
    bars: list[Bar]
    tools: list[dict[str, Any]]
    critical: list[str]
    """Bar ids, in time order: the chain of waits that set the run's wall time."""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def build(records: list[Record], log_path: Path | None = None) -> Timeline:
    if not records:
        raise ValueError("the log has no lines")
    times = [_seconds(r) for r in records if r.get("ts")]
    zero, last = min(times), max(times)
    session = next((r for r in records if r.get("event") == "session_start"), {})
    ended = next((r for r in records if r.get("event") == "session_end"), None)
    lanes: dict[str, Lane] = {}
    bars: list[Bar] = []
    open_turns: dict[str, Record] = {}
    pending: dict[str, tuple[float, list[str]]] = {}  # calls asked for, not yet answered
    waits: dict[str, float] = {}  # worker: when its caller asked for it
    delegate_order: dict[str, list[str]] = {}
    diffs: dict[str, str] = {}

    def at(record: Record) -> float:
        return _seconds(record) - zero

    def add(agent: str, kind: str, start: float, end: float, label: str, **more: Any) -> Bar:
        bar = Bar(f"b{len(bars)}", agent, kind, max(0.0, start), max(start, end), label, **more)
        bars.append(bar)
        return bar

    for r in records:
        event, agent = r.get("event"), str(r.get("agent_id", "?"))
        now = at(r)
        if event == "agent_start":
            parent = r.get("parent_id")
            depth = lanes[parent].depth + 1 if parent in lanes else (0 if not parent else 1)
            lanes[agent] = Lane(
                agent, parent, str(r.get("profile", "")), depth, now, now, "running", open=True
            )
            if agent in waits and now - waits[agent] > 0.001:
                add(agent, "wait", waits.pop(agent), now, "waiting for the workspace")
        if agent in lanes and r.get("node"):
            lanes[agent].node = str(r["node"])
        if event == "agent_end" and agent in lanes:
            lane = lanes[agent]
            lane.end, lane.open = now, False
            lane.status, lane.reason = str(r.get("status")), str(r.get("reason", ""))
        elif event == "turn_start":
            open_turns[agent] = r
        elif event == "llm_call":
            open_turns.pop(agent, None)
            names = [str(c.get("name")) for c in r.get("calls") or [] if isinstance(c, dict)]
            pending[agent] = (now, names)
            elapsed = float(r.get("elapsed_s") or 0)
            tokens = int(r.get("total_tokens") or 0)
            if agent in lanes:
                lanes[agent].tokens += tokens
                lanes[agent].model_s += elapsed
            add(
                agent,
                "model",
                now - elapsed,
                now,
                f"model · step {r.get('step')}",
                detail={
                    "prompt_tokens": r.get("prompt_tokens"),
                    "completion_tokens": r.get("completion_tokens"),
                    "attempt": r.get("attempt"),
                    "finish_reason": r.get("finish_reason"),
                    "text": _cut(str(r.get("text") or "")),
                    "calls": r.get("calls") or [],
                },
            )
        elif event == "tool_call":
            if agent in pending and r.get("name") in pending[agent][1]:
                pending[agent][1].remove(str(r.get("name")))
            elapsed = float(r.get("elapsed_s") or 0)
            if agent in lanes:
                lanes[agent].tool_s += elapsed
            name = str(r.get("name"))
            content = str(r.get("content") or r.get("result_preview") or "")
            child = None
            if name == "delegate":  # its worker: named by its report, or the next started
                order = delegate_order.get(agent, [])
                found = WORKER_IN_REPORT.match(content)
                child = found.group(1) if found else (order[0] if order else None)
                if child in order:
                    order.remove(child)
            add(
                agent,
                "tool",
                now - elapsed,
                now,
                f"{name} {r.get('label') or ''}".strip(),
                error=bool(r.get("is_error")),
                child=child,
                detail={
                    "name": name,
                    "args": r.get("args"),
                    "summary": r.get("summary"),
                    "sandbox": r.get("sandbox"),
                    "elapsed_s": elapsed,
                    "result": _cut(content),
                    "result_chars": r.get("result_chars"),
                },
            )
        elif event == "delegate_start":
            child_id = str(r.get("child_id"))
            waits[child_id] = now
            delegate_order.setdefault(agent, []).append(child_id)
        elif event == "llm_retry":
            wait = float(r.get("wait_s") or 0)
            add(agent, "retry", now, now + wait, f"retry {r.get('attempt')}: {r.get('error')}")
        elif event == "compaction":
            elapsed = float(r.get("elapsed_s") or 0)
            add(
                agent,
                "compaction",
                now - elapsed,
                now,
                f"compaction ({r.get('reason')}): {r.get('tokens_before')} → "
                f"{r.get('tokens_after')} tokens",
                detail={"state": _cut(str(r.get("state") or ""))},
            )
        elif event == "verification":
            add(
                agent,
                "verification",
                now,
                now,
                f"verification: {r.get('verdict')} ({r.get('action')})",
                error=r.get("action") == "sent_back",
                detail={"reason": r.get("reason")},
            )
        elif event == "fresh_attempt":
            made_from = r.get("made_from")
            what = (
                f"join of samples {made_from[0]} and {made_from[1]}"
                if made_from
                else f"fresh attempt {r.get('attempt')}"
            )
            add(agent, "verification", now, now,
                f"{what}: {'kept' if r.get('kept') else 'taken back'}", error=not r.get("kept"),
                detail={"reason": r.get("reason"), "files": r.get("files")})  # fmt: skip
        elif event == "limit":
            add(agent, "limit", now, now, f"limit: {r.get('limit')}", error=True,
                detail={"detail": r.get("detail")})  # fmt: skip
        elif event == "change_set" and log_path is not None and r.get("diff_file"):
            diffs[agent] = _read_diff(log_path, str(r["diff_file"]))
    end = last - zero
    for agent, turn in open_turns.items():
        add(agent, "model", at(turn), end, f"model · step {turn.get('step')} (no answer)",
            open=True)  # fmt: skip
    for agent, (asked, names) in pending.items():
        if agent in lanes and lanes[agent].open:
            for name in names:
                add(agent, "tool", asked, end, f"{name} (no result)", open=True,
                    detail={"name": name, "result": "the log ends while it runs"})  # fmt: skip
    for lane in lanes.values():
        if lane.open:
            lane.end, lane.status = end, "interrupted"
            lane.reason = "the log ends while it runs (killed, or still going)"
        if lane.agent in diffs:
            lane_diff = diffs[lane.agent]
            for bar in bars:
                if bar.child == lane.agent:
                    bar.detail["diff"] = lane_diff
    ordered = _tree_order(lanes)
    return Timeline(
        run_id=str(session.get("session_id") or records[0].get("session_id", "")),
        task=str(session.get("task", "")),
        started=str(records[0].get("ts", "")),
        wall_s=round(end, 3),
        status=str(ended.get("status")) if ended else "interrupted",
        lanes=ordered,
        bars=bars,
        tools=_tool_totals(bars),
        critical=_critical_path(ordered, bars),
    )


def _tree_order(lanes: dict[str, Lane]) -> list[Lane]:
    children: dict[str | None, list[Lane]] = {}
    for lane in sorted(lanes.values(), key=lambda x: x.start):
        parent = lane.parent if lane.parent in lanes else None
        children.setdefault(parent, []).append(lane)
    ordered: list[Lane] = []

    def visit(lane: Lane, depth: int) -> None:
        lane.depth = depth
        ordered.append(lane)
        for child in children.get(lane.agent, []):
            visit(child, depth + 1)

    for root in children.get(None, []):
        visit(root, 0)
    return ordered


def _tool_totals(bars: list[Bar]) -> list[dict[str, Any]]:
    totals: dict[str, dict[str, Any]] = {}
    for bar in bars:
        if bar.kind != "tool":
            continue
        name = str(bar.detail.get("name"))
        row = totals.setdefault(name, {"tool": name, "calls": 0, "seconds": 0.0, "errors": 0})
        row["calls"] += 1
        row["seconds"] = round(row["seconds"] + bar.end - bar.start, 3)
        row["errors"] += int(bar.error)
    return sorted(totals.values(), key=lambda row: -row["seconds"])


def _critical_path(lanes: list[Lane], bars: list[Bar]) -> list[str]:
    """From the top agent down: its own bars, and for each batch of delegate calls the
    worker that ended last (with its wait), followed into its own bars the same way."""
    by_agent: dict[str, list[Bar]] = {}
    for bar in bars:
        by_agent.setdefault(bar.agent, []).append(bar)
    ends = {lane.agent: lane.end for lane in lanes}

    def path(agent: str, seen: frozenset[str]) -> list[str]:
        own = sorted(
            (
                b
                for b in by_agent.get(agent, [])
                if b.kind in ("model", "tool", "wait", "compaction")
            ),
            key=lambda b: b.start,
        )
        chosen: list[str] = []
        index = 0
        while index < len(own):
            bar = own[index]
            if bar.child is None:
                chosen.append(bar.id)
                index += 1
                continue
            batch = [bar]  # delegate calls that ran together
            while index + len(batch) < len(own) and own[index + len(batch)].child is not None:
                if own[index + len(batch)].start > max(b.end for b in batch):
                    break
                batch.append(own[index + len(batch)])
            index += len(batch)
            last = max(batch, key=lambda b: ends.get(b.child or "", 0.0))
            chosen.append(last.id)
            if last.child and last.child not in seen:
                chosen.extend(path(last.child, seen | {last.child}))
        return chosen

    roots = [lane.agent for lane in lanes if lane.depth == 0]
    return path(roots[0], frozenset(roots[:1])) if roots else []


def _seconds(record: Record) -> float:
    return datetime.fromisoformat(str(record["ts"])).timestamp()


def _cut(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters in the log ...]"


def _read_diff(log_path: Path, named: str) -> str:
    """A change set's diff beside the log: `<run>.changes/<agent>.diff` as the log names
    it, and nothing else. A log can be planted by a repository, so a name that leads
    anywhere else, or through a link, is not read."""
    folder, _, name = named.partition("/")
    if folder != log_path.with_suffix(".changes").name or not name or "/" in name:
        return ""
    if not name.endswith(".diff") or name.startswith("."):
        return ""
    try:
        fd = os.open(log_path.parent / folder / name, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as file:
        data = file.read(MAX_DIFF_CHARS + 1)
    return _cut(data.decode("utf-8", errors="replace"), MAX_DIFF_CHARS)
