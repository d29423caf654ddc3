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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from supervisor.timeline_outcome import RunOutcome, outcome_of
from workers.log.reader import Line, lines_of, of_type
from workers.log.schema import (
    AgentEnd,
    AgentStart,
    ChangeSet,
    CheckRan,
    Compaction,
    DelegateEnd,
    DelegateStart,
    FreshAttempt,
    Limit,
    LlmCall,
    LlmRetry,
    Merge,
    SessionEnd,
    SessionStart,
    ToolCalled,
    TurnStart,
    Verification,
)

Record = dict[str, Any]
# What one bar's detail may carry into the page: enough to read, never a whole log.
MAX_DETAIL_CHARS = 20_000
MAX_DIFF_CHARS = 40_000
WORKER_IN_REPORT = re.compile(r"^worker (\S+) \(", re.MULTILINE)
"""How a worker's report begins: a fan-out's result holds one per task."""
FAN_OUT_HEAD = re.compile(r"^(\d+) workers, in the order of their tasks")
"""How a fan-out's result begins (supervisor/fan_out.py)."""


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
    merge: str = ""
    """An isolated editor's merge: applied, conflict, nothing or skipped."""


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
    outcome: RunOutcome
    """What the run came to, shown first."""
    cost: str = ""
    """What the run's model calls cost (supervisor/costs.py), when the page knows prices."""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def build(records: list[Record], log_path: Path | None = None) -> Timeline:
    lines = lines_of(records)
    stamped = [line.ts for line in lines if line.ts]
    if not records or not stamped:
        raise ValueError("the log has no lines")
    zero, last = min(stamped), max(stamped)
    built = _Builder(zero, log_path)
    for line in lines:
        built.add_line(line)
    end = last - zero
    built.close(end)
    session = next((e for _, e in of_type(lines, SessionStart)), None)
    first = next((line for line in lines if isinstance(line.event, SessionStart)), lines[0])
    ended = next((e for _, e in of_type(lines, SessionEnd)), None)
    ordered = _tree_order(built.lanes)
    return Timeline(
        run_id=first.session_id,
        task=session.task if session else "",
        started=datetime.fromtimestamp(lines[0].ts, UTC).isoformat(timespec="milliseconds"),
        wall_s=round(end, 3),
        status=ended.status if ended else "interrupted",
        lanes=ordered,
        bars=built.bars,
        tools=_tool_totals(built.bars),
        critical=_critical_path(ordered, built.bars),
        outcome=outcome_of(lines),
    )


class _Builder:
    """Lanes and bars, line by line: `_on_<event>` for each event the timeline shows."""

    def __init__(self, zero: float, log_path: Path | None) -> None:
        self.zero, self.log_path = zero, log_path
        self.lanes: dict[str, Lane] = {}
        self.bars: list[Bar] = []
        self.open_turns: dict[str, tuple[float, int]] = {}  # asked, step
        self.pending: dict[str, tuple[float, list[str]]] = {}  # calls asked for, unanswered
        self.waits: dict[str, float] = {}  # worker: when its caller asked for it
        self.delegate_order: dict[str, list[str]] = {}
        self.diffs: dict[str, str] = {}

    def add(self, agent: str, kind: str, start: float, end: float, label: str, **more: Any) -> Bar:
        bar = Bar(
            f"b{len(self.bars)}", agent, kind, max(0.0, start), max(start, end), label, **more
        )
        self.bars.append(bar)
        return bar

    def add_line(self, line: Line) -> None:
        agent, now = line.agent_id or "?", line.ts - self.zero
        handler = getattr(self, "_on_" + line.event.event, None)
        if handler is not None:
            handler(agent, now, line.event, line)
        if agent in self.lanes and line.node:
            self.lanes[agent].node = line.node

    def _on_agent_start(self, agent: str, now: float, _e: AgentStart, line: Line) -> None:
        parent = line.parent_id
        depth = self.lanes[parent].depth + 1 if parent in self.lanes else (0 if not parent else 1)
        self.lanes[agent] = Lane(
            agent, parent, line.profile or "", depth, now, now, "running", open=True
        )
        if agent in self.waits and now - self.waits[agent] > 0.001:
            self.add(agent, "wait", self.waits.pop(agent), now, "waiting for the workspace")

    def _on_agent_end(self, agent: str, now: float, e: AgentEnd, _line: Line) -> None:
        if (lane := self.lanes.get(agent)) is not None:
            lane.end, lane.open, lane.status, lane.reason = now, False, e.status, e.reason

    def _on_merge(self, agent: str, _now: float, e: Merge, _line: Line) -> None:
        if (lane := self.lanes.get(agent)) is not None:
            lane.merge = e.status

    def _on_turn_start(self, agent: str, now: float, e: TurnStart, _line: Line) -> None:
        self.open_turns[agent] = (now, e.step)

    def _on_llm_call(self, agent: str, now: float, e: LlmCall, _line: Line) -> None:
        self.open_turns.pop(agent, None)
        names = [str(c.get("name")) for c in e.calls if isinstance(c, dict)]
        self.pending[agent] = (now, names)
        if (lane := self.lanes.get(agent)) is not None:
            lane.tokens += e.total_tokens
            lane.model_s += e.elapsed_s
        detail = {
            "prompt_tokens": e.prompt_tokens,
            "completion_tokens": e.completion_tokens,
            "attempt": e.attempt,
            "finish_reason": e.finish_reason,
            "text": _cut(e.text),
            "calls": e.calls,
        }
        self.add(agent, "model", now - e.elapsed_s, now, f"model · step {e.step}", detail=detail)

    def _on_tool_call(self, agent: str, now: float, e: ToolCalled, _line: Line) -> None:
        if agent in self.pending and e.name in self.pending[agent][1]:
            self.pending[agent][1].remove(e.name)
        if (lane := self.lanes.get(agent)) is not None:
            lane.tool_s += e.elapsed_s
        content = e.content or e.result_preview
        child, workers = self._workers_of(agent, e.name, content)
        detail: dict[str, Any] = {
            "name": e.name,
            "args": e.args,
            "summary": e.summary,
            "sandbox": e.sandbox,
            "elapsed_s": e.elapsed_s,
            "result": _cut(content),
            "result_chars": e.result_chars,
        }
        label = f"{e.name} {e.label or ''}".strip()
        if len(workers) > 1:  # a fan-out: one call, a worker per task
            detail["workers"] = workers
            label = f"{e.name} ×{len(workers)} {e.label or ''}".strip()
        self.add(agent, "tool", now - e.elapsed_s, now, label, error=e.is_error, child=child,
                 detail=detail)  # fmt: skip

    def _workers_of(self, agent: str, name: str, report: str) -> tuple[str | None, list[str]]:
        """A delegate call's workers, named by its report (or the next started), and the
        one the critical path follows: the last of them to end."""
        if name != "delegate":
            return None, []
        order = self.delegate_order.get(agent, [])
        fan_out = FAN_OUT_HEAD.match(report)
        count = int(fan_out.group(1)) if fan_out else 1  # a worker's own words come after
        workers = WORKER_IN_REPORT.findall(report)[:count] or order[:1]
        for worker in workers:
            if worker in order:
                order.remove(worker)
        ended = [w for w in workers if w in self.lanes]
        last = max(ended, key=lambda w: self.lanes[w].end) if ended else None
        return last or (workers[0] if workers else None), workers

    def _on_delegate_start(self, agent: str, now: float, e: DelegateStart, _line: Line) -> None:
        self.waits[e.child_id] = now
        self.delegate_order.setdefault(agent, []).append(e.child_id)

    def _on_delegate_end(self, agent: str, now: float, e: DelegateEnd, _line: Line) -> None:
        """A worker that ended before it started (its sandbox or model could not be had)
        still has its lane, in its status's colour."""
        if e.child_id not in self.lanes:
            depth = self.lanes[agent].depth + 1 if agent in self.lanes else 1
            start = self.waits.pop(e.child_id, now - e.elapsed_s)
            self.lanes[e.child_id] = Lane(
                e.child_id, agent, e.child_profile, depth, start, now, e.status, e.reason
            )

    def _on_llm_retry(self, agent: str, now: float, e: LlmRetry, _line: Line) -> None:
        self.add(agent, "retry", now, now + e.wait_s, f"retry {e.attempt}: {e.error}")

    def _on_compaction(self, agent: str, now: float, e: Compaction, _line: Line) -> None:
        label = f"compaction ({e.reason}): {e.tokens_before} → {e.tokens_after} tokens"
        self.add(agent, "compaction", now - e.elapsed_s, now, label,
                 detail={"state": _cut(e.state)})  # fmt: skip

    def _on_verification(self, agent: str, now: float, e: Verification, _line: Line) -> None:
        self.add(agent, "verification", now, now, f"verification: {e.verdict} ({e.action})",
                 error=e.action == "sent_back", detail={"reason": e.reason})  # fmt: skip

    def _on_check(self, agent: str, now: float, e: CheckRan, _line: Line) -> None:
        took = 0.0 if e.reused else e.seconds
        self.add(agent, "verification", now - took, now, f"check {e.line}",
                 error=e.verdict in ("failed", "timed_out"),
                 detail={"command": e.command or "", "detail": e.detail})  # fmt: skip

    def _on_fresh_attempt(self, agent: str, now: float, e: FreshAttempt, _line: Line) -> None:
        what = f"fresh attempt {e.attempt}"
        if e.made_from:
            what = f"join of samples {e.made_from[0]} and {e.made_from[1]}"
        self.add(agent, "verification", now, now,
                 f"{what}: {'kept' if e.kept else 'taken back'}", error=not e.kept,
                 detail={"reason": e.reason, "files": e.files})  # fmt: skip

    def _on_limit(self, agent: str, now: float, e: Limit, _line: Line) -> None:
        self.add(agent, "limit", now, now, f"limit: {e.limit}", error=True,
                 detail={"detail": e.detail})  # fmt: skip

    def _on_change_set(self, agent: str, _now: float, e: ChangeSet, _line: Line) -> None:
        if self.log_path is not None and e.diff_file:
            self.diffs[agent] = _read_diff(self.log_path, e.diff_file)

    def close(self, end: float) -> None:
        """What the log never saw end runs to its last line, marked open."""
        for agent, (asked, step) in self.open_turns.items():
            self.add(agent, "model", asked, end, f"model · step {step} (no answer)", open=True)
        for agent, (asked, names) in self.pending.items():
            if agent in self.lanes and self.lanes[agent].open:
                for name in names:
                    self.add(agent, "tool", asked, end, f"{name} (no result)", open=True,
                             detail={"name": name, "result": "the log ends while it runs"})  # fmt: skip
        for lane in self.lanes.values():
            if lane.open:
                lane.end, lane.status = end, "interrupted"
                lane.reason = "the log ends while it runs (killed, or still going)"
            if lane.agent in self.diffs:
                for bar in self.bars:
                    if bar.child == lane.agent:
                        bar.detail["diff"] = self.diffs[lane.agent]


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
