"""N read-only workers against a fake model with a fixed 200 ms latency per call.

The measure is the span of the supervisor's delegate batch, first worker start to last
worker end: wall(N) / wall(1). With four readers at once (--max-parallel), N ≤ 4
should cost about one worker's time; N = 8 about two.
"""

from __future__ import annotations

import tempfile
from datetime import datetime
from pathlib import Path

from bench.common import Row, size
from supervisor.run_plan import Ceiling, RunPlan
from supervisor.runlog import read_records
from supervisor.session import Session
from workers import state
from workers.assembly.profiles import builtin_dir, load_profiles
from workers.model.scripted import RoutedModel, Step, call, calls, say
from workers.tools import BUILTIN_TOOLS

LATENCY_S = 0.2
MAX_PARALLEL = 4


def batch_seconds(n: int) -> float:
    tasks = [f"question {i}" for i in range(n)]
    scripts: dict[str, list[Step]] = {
        "survey": [
            calls(*(("delegate", {"profile": "explorer", "task": t}) for t in tasks)),
            say("done"),
        ],
        **{t: [call("list_dir"), say("answer")] for t in tasks},
    }
    model = RoutedModel(scripts, latency=LATENCY_S)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        session = Session(workspace, state.workspace_dir(workspace, state.LOGS))
        plan = RunPlan(
            profiles=load_profiles([builtin_dir()], BUILTIN_TOOLS),
            tools=dict(BUILTIN_TOOLS),
            make_model=lambda *_: model,
            ceiling=Ceiling(max_parallel=MAX_PARALLEL),
        )
        session.run("survey", plan)
        records = read_records(session.log.path)
    starts = [_ts(r) for r in records if r["event"] == "delegate_start"]
    ends = [_ts(r) for r in records if r["event"] == "delegate_end"]
    assert len(ends) == n
    return max(ends) - min(starts)


def _ts(record: dict[str, object]) -> float:
    return datetime.fromisoformat(str(record["ts"])).timestamp()


def run() -> list[Row]:
    tries = size(2, 1)
    one = min(batch_seconds(1) for _ in range(tries))
    rows = [Row("parallel readers: wall(1 worker)", round(one, 3), "s")]
    for n in (4, 8)[: size(2, 1)]:
        ratio = min(batch_seconds(n) for _ in range(tries)) / one
        target = "≤ 1.1" if n <= MAX_PARALLEL else f"≈ {n / MAX_PARALLEL:.0f} (4 at once)"
        ok = ratio <= 1.1 if n <= MAX_PARALLEL else None
        rows.append(
            Row(f"parallel readers: wall({n}) / wall(1)", round(ratio, 3), "ratio", target, ok)
        )
    return rows
