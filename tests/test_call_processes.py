"""Every process a call starts in the container ends with the call: detached, timed out,
cancelled or forking, none is left to act after its reply (a real Docker daemon)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docker_support import require_docker, user_workspace
from workers.limits import Budget
from workers.sandbox import container, tool_server
from workers.sandbox.docker import DockerSandbox, docker_sandbox
from workers.sandbox.options import DockerOptions
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import ToolResult

# The planted processes write 2 s after they start; waiting past that shows they never do.
PAST_THEIR_WRITE_S = 3.5
# Lists every process in the container with its arguments, nothing of ours included.
LIST = "ps -eo uid=,args="


@pytest.fixture(scope="module")
def client() -> Any:
    return require_docker()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return user_workspace(tmp_path / "ws")


@pytest.fixture
def box(client: Any, ws: Path) -> Iterator[DockerSandbox]:
    options = DockerOptions(memory="256m", pids=64)
    with docker_sandbox(ws, options, run_id="t", agent_id="w1", docker_client=client) as sandbox:
        yield sandbox


def shell(sandbox: DockerSandbox, command: str, budget: Budget | None = None) -> ToolResult:
    tool = BUILTIN_TOOLS["run_shell"]
    args = tool.args.model_validate({"command": command, "timeout": 30})
    return sandbox.run(tool, args, budget or Budget(max_seconds=60))


def assert_gone(sandbox: DockerSandbox, ws: Path, marker: str) -> None:
    """No process carrying `marker` is left now, and none writes a file later."""
    listed = shell(sandbox, LIST)
    assert not listed.is_error and marker not in listed.output, listed.output
    time.sleep(PAST_THEIR_WRITE_S)
    assert sorted(p.name for p in ws.iterdir()) == []
    assert shell(sandbox, "echo still-serving").output.startswith("still-serving")


DETACHED = {
    "setsid": "setsid sh -c 'sleep 2; echo planted > late.txt' >/dev/null 2>&1 </dev/null &",
    "double fork": "( ( sleep 2; touch late.txt ) & ) &",
    "nohup": "nohup sh -c 'sleep 2; touch late.txt' >/dev/null 2>&1 &",
    "setsid and double fork": "( setsid sh -c '( sleep 2; touch late.txt ) &' & ) >/dev/null 2>&1",
}


@pytest.mark.parametrize("command", DETACHED.values(), ids=DETACHED.keys())
def test_a_detached_process_ends_with_its_call(box: DockerSandbox, ws: Path, command: str) -> None:
    started = time.monotonic()
    result = shell(box, command)
    assert not result.is_error and time.monotonic() - started < 2  # it returned at once
    assert_gone(box, ws, "sleep 2")


def test_a_timed_out_call_ends_its_detached_processes(box: DockerSandbox, ws: Path) -> None:
    tool = BUILTIN_TOOLS["run_shell"]
    command = "setsid sh -c 'sleep 2; touch late.txt' >/dev/null 2>&1 </dev/null & sleep 60"
    args = tool.args.model_validate({"command": command, "timeout": 1})
    result = box.run(tool, args, Budget(max_seconds=60))
    assert "killed: timed out after 1s" in result.output
    assert_gone(box, ws, "sleep 2")


def test_a_cancelled_call_ends_its_detached_processes(box: DockerSandbox, ws: Path) -> None:
    budget = Budget(max_seconds=60)
    threading.Timer(0.5, budget.cancel).start()
    command = "setsid sh -c 'sleep 2; touch late.txt' >/dev/null 2>&1 </dev/null & sleep 60"
    result = shell(box, command, budget)
    assert "the agent was cancelled" in result.output
    assert_gone(box, ws, "sleep 2")


# A process that forks and lets its parent exit, 200 times, takes a new pid every 20 ms:
# a kill that walks /proc pid by pid can miss it. It is still hopping when the call ends.
HOPPER = """
import os, time
for _ in range(200):
    if os.fork():
        os._exit(0)
    time.sleep(0.02)
open("late.txt", "w").write("planted")
"""


def test_a_fork_loop_cannot_keep_a_process_alive(box: DockerSandbox, ws: Path) -> None:
    hopper = f"setsid python3 -c '{HOPPER}' >/dev/null 2>&1 </dev/null &"
    forker = (
        "setsid sh -c 'for i in $(seq 200); do (sleep 2; touch late.txt) & done' >/dev/null 2>&1 &"
    )
    assert not shell(box, f"{hopper} {forker} sleep 0.3").is_error
    assert_gone(box, ws, "python3 -c")
    assert sorted(p.name for p in ws.iterdir()) == []


def test_the_keeper_runs_as_a_uid_no_command_has(box: DockerSandbox) -> None:
    listed = shell(box, "ps -o uid= -p 1; id -u").output.split()
    assert listed[0] == str(container.KEEPER_UID) and listed[1] != listed[0]
    assert container.keeper_user("1000:1000") == f"{container.KEEPER_UID}:{container.KEEPER_UID}"
    assert container.keeper_user(f"{container.KEEPER_UID}:5").split(":")[0] != str(
        container.KEEPER_UID
    )


def test_the_server_refuses_to_serve_outside_a_container() -> None:
    # Here its parent is pytest's shell, not outside a PID namespace: kill(-1) would reach
    # the user's own processes, so it must not start.
    with pytest.raises(SystemExit, match="docker exec"):
        tool_server.check_alone()
