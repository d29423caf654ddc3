from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from workers import executor
from workers.limits import Budget
from workers.model import ToolCall
from workers.sandbox.host import HostSandbox
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import ToolContext, ToolResult

# A suite started in the background of a non-interactive shell (`make test &`, `nohup`)
# inherits SIGINT ignored, and so would every gaffer it starts: the Ctrl-C tests would
# signal processes that cannot hear it. The suite takes the signal back, so the
# processes it starts begin with the default, as at a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

RunTool = Callable[..., ToolResult]


def must_run_here(reason: str) -> None:
    """What a test needs is missing: in CI that is a failure, elsewhere a skip.

    ripgrep comes with the package (its wheel), and CI installs Docker and runs as
    root, so nothing may skip there.
    """
    if os.environ.get("CI") or os.environ.get("GAFFER_REQUIRE_DOCKER") == "1":
        pytest.fail(f"this test must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """gaffer's state folder, per test and never the user's own (workers/state.py)."""
    folder = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(folder))
    return folder


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


SECRET = "host secret canary\n"
"""What a file outside the workspace holds: it must never be read, changed or sent."""


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the workspace with a secret in it."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET)
    return folder


@pytest.fixture
def run_tool(workspace: Path) -> RunTool:
    """Call a built-in tool the way the loop does: raw JSON arguments, host sandbox."""

    def run(name: str, *, approve: bool = False, **arguments: object) -> ToolResult:
        context = ToolContext(workspace, approve=lambda _c, _r: approve)
        call = ToolCall(id="t1", name=name, arguments=json.dumps(arguments))
        arguments = executor.parse_arguments(call.arguments)
        return executor.execute(call, arguments, BUILTIN_TOOLS, HostSandbox(context), Budget())

    return run
