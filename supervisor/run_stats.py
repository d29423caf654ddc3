"""`gaffer stats` and the chat's /stats: tokens, time and tool calls of a run, per agent
and per tool, with the run's end as its log says it (supervisor/run_end.py)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping

from rich.table import Table

from supervisor.costs import cost_by_agent, dollars, run_cost
from supervisor.runlog import Record, status_with_exit
from supervisor.settings import Price
from workers.log.reader import Line, lines_of, of_type
from workers.log.schema import CheckRan, LlmCall, LlmRetry, SessionEnd, ToolCalled


def _interval(line: Line, elapsed_s: float) -> tuple[float, float]:
    """When a call ran: it is logged as it ends, with how long it took."""
    return (line.ts - elapsed_s, line.ts) if line.ts else (0.0, 0.0)


def _covered(intervals: list[tuple[float, float]]) -> float:
    """Seconds during which at least one of the intervals ran: calls that overlap (a
    batch of workers) count once, so an agent is never busier than the run is long."""
    total, reached = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reached:
            total += end - max(start, reached)
            reached = end
    return total


def stats(
    records: list[Record], *, live: bool = False, prices: Mapping[str, Price] | None = None
) -> list[Table]:
    """Tokens, time and tool calls: per agent, and per tool. `live`: the session is still
    going (the chat), so a log with no end yet is running, not interrupted."""
    agents: dict[str, Counter[str]] = defaultdict(Counter)
    models: dict[str, dict[str, None]] = defaultdict(dict)  # each agent's, as they answered
    busy: dict[str, list[tuple[float, float]]] = defaultdict(list)
    tools: dict[str, Counter[str]] = defaultdict(Counter)
    tool_time: dict[str, float] = defaultdict(float)
    lines = lines_of(records)
    for line in lines:
        agent = line.agent_id or "?"
        match line.event:
            case LlmCall() as e:
                agents[agent]["llm_calls"] += 1
                models[agent][e.model] = None
                agents[agent]["prompt_tokens"] += e.prompt_tokens
                agents[agent]["cached_tokens"] += e.cached_tokens or 0
                agents[agent]["completion_tokens"] += e.completion_tokens
                agents[agent]["reasoning_tokens"] += e.reasoning_tokens or 0
                busy[agent].append(_interval(line, e.elapsed_s))
            case LlmRetry():
                agents[agent]["retries"] += 1
            case ToolCalled() as e:
                agents[agent]["tool_calls"] += 1
                tools[e.name]["calls"] += 1
                tools[e.name]["errors"] += int(e.is_error)
                tool_time[e.name] += e.elapsed_s
                busy[agent].append(_interval(line, e.elapsed_s))
    costs = cost_by_agent(records, prices or {})
    # Reasoning tokens (part of the completion tokens) only when a model reported some.
    reasoned = any(c["reasoning_tokens"] for c in agents.values())
    per_agent = Table(title="per agent")
    for column in (
        "agent",
        "model",
        "llm calls",
        "retries",
        "prompt tok",
        "cached tok",
        "completion tok",
        *(["of which reasoning"] if reasoned else []),
        "tool calls",
        "busy s",
        "cost",
    ):
        per_agent.add_column(column, justify="left" if column in ("agent", "model") else "right")
    for agent, c in agents.items():
        per_agent.add_row(
            agent,
            ", ".join(models[agent]) or "-",
            str(c["llm_calls"]),
            str(c["retries"]),
            str(c["prompt_tokens"]),
            str(c["cached_tokens"]),
            str(c["completion_tokens"]),
            *([str(c["reasoning_tokens"])] if reasoned else []),
            str(c["tool_calls"]),
            f"{_covered(busy[agent]):.2f}",
            dollars(costs.get(agent, 0.0)),  # no model call: nothing spent
        )
    per_tool = Table(title="per tool")
    for column in ("tool", "calls", "errors", "total s"):
        per_tool.add_column(column, justify="left" if column == "tool" else "right")
    for name, c in sorted(tools.items()):
        per_tool.add_row(name, str(c["calls"]), str(c["errors"]), f"{tool_time[name]:.3f}")
    end = next((e for _, e in reversed(of_type(lines, SessionEnd))), None)
    run = _run_table(end, agents, live, dollars(run_cost(records, prices or {})))
    return [run, per_agent, per_tool, *_checks_table(lines)]


def _checks_table(lines: list[Line]) -> list[Table]:
    """Each check gaffer ran, by the agent whose answer it judged; none: no table."""
    checks = of_type(lines, CheckRan)
    if not checks:
        return []
    table = Table(title="checks (run by gaffer)")
    for column in ("agent", "verdict", "command", "passed", "failed", "s"):
        table.add_column(column, justify="right" if column in ("passed", "failed", "s") else "left")
    for line, e in checks:
        table.add_row(
            line.agent_id or "?",
            e.verdict + (" (reused)" if e.reused else ""),
            e.command or e.detail,
            "-" if e.passed is None else str(e.passed),
            "-" if e.failed is None else str(e.failed),
            f"{e.seconds:.1f}",
        )
    return [table]


def _run_table(
    end: SessionEnd | None, agents: dict[str, Counter[str]], live: bool, cost: str
) -> Table:
    total = Table(title="run")
    for column in ("status", "tokens", "cost", "tool calls", "wall s"):
        total.add_column(column, justify="left" if column == "status" else "right")
    if end:
        total.add_row(
            status_with_exit(end), str(end.tokens), cost, str(end.tool_calls), str(end.elapsed_s)
        )
    elif live:  # so far: what the calls logged add up to
        tokens = sum(c["prompt_tokens"] + c["completion_tokens"] for c in agents.values())
        calls = sum(c["tool_calls"] for c in agents.values())
        total.add_row("running", str(tokens), cost, str(calls), "-")
    else:
        total.add_row("interrupted", "?", cost, "?", "?")
    return total
