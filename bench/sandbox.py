"""The Docker sandbox: time from `delegate` to the first tool result in a fresh
container, and the per-call overhead of a tool in the container over the host."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import Row, size
from supervisor.run_plan import RunPlan
from supervisor.runlog import read_records
from supervisor.session import Session
from workers.assembly.profiles import builtin_dir, load_profiles
from workers.limits import Budget
from workers.model.scripted import RoutedModel, Step, call, say
from workers.sandbox import SandboxUnavailable, docker, guard
from workers.sandbox.host import HostSandbox
from workers.sandbox.options import DockerOptions
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import Tool, ToolContext

CALLS = 200
# A large repository, as issue 13 sizes its change-set benchmark.
GUARD_FILES = 50_000
USER_UID = 1000


def _workspace(root: Path) -> Path:
    workspace = root / "ws"
    workspace.mkdir()
    (workspace / "a.py").write_text("print('hello')\n" * 20)
    if os.geteuid() == 0:  # containers never run as root: give it to an ordinary user
        for path in (workspace, workspace / "a.py"):
            os.chown(path, USER_UID, USER_UID)
    return workspace


def ready_seconds() -> float:
    scripts: dict[str, list[Step]] = {
        "go": [call("delegate", profile="coder", task="read"), say("ok")],
        "read": [call("read_file", path="a.py"), say("read")],
    }
    model = RoutedModel(scripts)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = _workspace(Path(tmp))
        session = Session(workspace, Path(tmp) / "logs")
        plan = RunPlan(
            profiles=load_profiles([builtin_dir()], BUILTIN_TOOLS),
            tools=dict(BUILTIN_TOOLS),
            make_model=lambda *_: model,
        )
        session.run("go", plan)
        records = read_records(session.log.path)
    start = next(r for r in records if r["event"] == "delegate_start")
    first = next(r for r in records if r["event"] == "tool_call" and r["agent_id"] == "w1")
    assert first["sandbox"] == "docker", first
    return _ts(first) - _ts(start)


def _ts(record: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(record["ts"])).timestamp()


def per_call_medians() -> tuple[float, float]:
    tool: Tool[Any] = BUILTIN_TOOLS["read_file"]
    args = tool.args.model_validate({"path": "a.py"})
    with tempfile.TemporaryDirectory() as tmp:
        workspace = _workspace(Path(tmp))
        host = HostSandbox(ToolContext(workspace))
        with docker.docker_sandbox(
            workspace, DockerOptions(), run_id="bench", agent_id="bench"
        ) as box:
            timings: dict[str, list[float]] = {"host": [], "docker": []}
            for _ in range(size(CALLS, 5)):
                for name, sandbox in (("host", host), ("docker", box)):
                    started = time.perf_counter()
                    sandbox.run(tool, args, Budget())
                    timings[name].append(time.perf_counter() - started)
    return statistics.median(timings["host"]), statistics.median(timings["docker"])


def guard_seconds(files: int | None = None) -> tuple[float, float]:
    """Survey (before a container) and sweep (after it) of a tree of `files` files."""
    files = size(GUARD_FILES, 200) if files is None else files
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp, "big")
        for i in range(files):
            folder = workspace / f"pkg{i // 500}" / f"mod{i // 50}"
            if i % 50 == 0:
                folder.mkdir(parents=True)
            (folder / f"f{i}.py").write_text("x = 1\n")
        (workspace / ".git").mkdir()
        started = time.perf_counter()
        before = guard.survey(workspace)
        surveyed = time.perf_counter() - started
        started = time.perf_counter()
        guard.sweep(workspace, before, "bench")
        return surveyed, time.perf_counter() - started


def run() -> list[Row]:
    try:
        docker.check_image(docker.client(), "gaffer-sandbox:latest")
    except SandboxUnavailable as error:
        return [Row(f"sandbox: skipped ({error})", 0, "")]
    ready = min(ready_seconds() for _ in range(size(3, 1)))
    calls, tree = size(CALLS, 5), size(GUARD_FILES, 200)
    host, in_docker = per_call_medians()
    overhead_ms = (in_docker - host) * 1000
    surveyed, swept = guard_seconds()
    return [
        Row(
            "sandbox: delegate → first tool result in a fresh container",
            round(ready, 3),
            "s",
            "≤ 1 s",
            ready <= 1.0,
        ),
        Row(f"sandbox: read_file median on the host ({calls} calls)", round(host * 1000, 3), "ms"),
        Row(
            f"sandbox: read_file median in the container ({calls} calls)",
            round(in_docker * 1000, 3),
            "ms",
        ),
        Row(
            "sandbox: per-call overhead, container − host",
            round(overhead_ms, 3),
            "ms",
            "≤ 5 ms",
            overhead_ms <= 5,
        ),
        Row(
            f"sandbox: boundary survey before a container, {tree:,}-file tree",
            round(surveyed, 3),
            "s",
            "≤ 1 s",
            surveyed <= 1.0,
        ),
        Row(
            f"sandbox: sweep for planted .git after it, {tree:,}-file tree",
            round(swept, 3),
            "s",
            "≤ 1 s",
            swept <= 1.0,
        ),
    ]
