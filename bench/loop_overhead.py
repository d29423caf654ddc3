"""The harness's own cost per agent step, with a zero-latency model and a no-op tool.

Everything a real step does besides the model and the tool is in the measurement:
argument parsing and validation, the repetition guard, events, and the jsonl log
written and flushed to disk.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from pydantic import Field

from bench.common import Row, size
from workers.agent import Agent
from workers.assembly.build import guards_for
from workers.hooks import Aids
from workers.limits import Budget, Limits
from workers.log.eventlog import JsonlLog
from workers.log.events import Emitter
from workers.loop import run_agent
from workers.model.scripted import LoopingModel
from workers.sandbox.host import HostSandbox
from workers.tools.base import Args, Tool, ToolContext, ToolResult

STEPS = 400


class NoopArgs(Args):
    path: str = Field(".")


NOOP = Tool(
    name="noop",
    description="Does nothing.",
    args=NoopArgs,
    run=lambda _ctx, _args: ToolResult(output="ok"),
    read_only=True,
)


def per_step_seconds(steps: int = STEPS) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        log = JsonlLog(root / "bench.jsonl")
        agent = Agent(
            model=LoopingModel(steps, tool="noop"),
            tools={"noop": NOOP},
            sandbox=HostSandbox(ToolContext(root)),
            events=Emitter([log]).bind(session_id="bench", agent_id="main"),
            limits=Limits(max_steps=steps + 1),
            budget=Budget(),
            guards=guards_for(Aids()),  # the reply and repetition guards, as every agent has
        )
        started = time.perf_counter()
        result = run_agent(agent, [{"role": "user", "content": "go"}])
        elapsed = time.perf_counter() - started
        log.close()
    assert result.tool_calls == steps, result.outcome
    return elapsed / (steps + 1)


def run() -> list[Row]:
    per_step = min(per_step_seconds(size(STEPS, 20)) for _ in range(size(3, 1)))
    ms = per_step * 1000
    return [
        Row("loop overhead per step (zero-latency model)", round(ms, 3), "ms", "≤ 1 ms", ms <= 1.0)
    ]
