"""run_shell on the host: exit codes, timeouts, floods, caps, approvals, secrets."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.conftest import RunTool
from workers.tools import shell
from workers.tools.base import ToolContext
from workers.tools.shell import RunShellArgs, run_shell


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def test_exit_code_is_always_in_the_result(run_tool: RunTool) -> None:
    ok = run_tool("run_shell", command="echo hi")
    assert ok.output == "hi\n[exit code 0; " + ok.output.split("exit code 0; ")[1]
    assert ok.facts.exit_code == 0 and not ok.is_error
    failed = run_tool("run_shell", command="ls no-such-file", approve=True)
    assert "[exit code 2;" in failed.output and failed.is_error
    assert failed.facts.exit_code == 2


def test_denied_command_is_not_run(run_tool: RunTool, workspace: Path) -> None:
    result = run_tool("run_shell", command="touch made.txt")
    assert result.is_error and result.output.startswith("denied:")
    assert "`touch` is not on the read-only allowlist" in result.output
    assert result.facts.denied is True
    assert not (workspace / "made.txt").exists()


def test_approved_command_runs(run_tool: RunTool, workspace: Path) -> None:
    result = run_tool("run_shell", command="touch made.txt", approve=True)
    assert not result.is_error
    assert (workspace / "made.txt").exists()


def test_timeout_kills_the_whole_process_group(run_tool: RunTool, workspace: Path) -> None:
    started = time.monotonic()
    result = run_tool(
        "run_shell", command="sleep 300 & echo $! > bg.pid; sleep 300", timeout=1, approve=True
    )
    assert time.monotonic() - started < 10
    assert "killed: timed out after 1s" in result.output and result.is_error
    assert result.facts.timed_out is True and result.facts.exit_code is None
    pid = int((workspace / "bg.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_agent_deadline_caps_the_timeout(workspace: Path) -> None:
    context = ToolContext(workspace, approve=lambda _c, _r: True, deadline=time.monotonic() + 1)
    started = time.monotonic()
    result = run_shell(context, RunShellArgs(command="sleep 30", timeout=600))
    assert time.monotonic() - started < 10
    assert "timed out" in result.output


def test_long_output_keeps_head_and_tail_and_saves_the_rest(
    run_tool: RunTool, workspace: Path
) -> None:
    result = run_tool("run_shell", command="seq 1 50000", approve=True)
    assert result.output.startswith("1\n2\n3\n")
    assert "50000\n[exit code 0;" in result.output
    assert len(result.output) < shell.MAX_OUTPUT_CHARS + 1000
    saved = result.facts.output_file
    assert saved and f"the full output is in {saved}" in result.output
    full = (workspace / saved).read_text()
    assert full == "".join(f"{i}\n" for i in range(1, 50001))
    assert run_tool("read_file", path=saved, offset=25000, limit=1).output.startswith("25000")


def test_a_flood_is_killed(run_tool: RunTool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shell, "MAX_SAVED_BYTES", 2 * 1024 * 1024)
    started = time.monotonic()
    result = run_tool("run_shell", command="yes flood", approve=True)
    assert time.monotonic() - started < 20
    assert "killed: printed more than 2 MB" in result.output


def test_secrets_never_reach_the_command(
    run_tool: RunTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    monkeypatch.setenv("HARMLESS", "visible")
    result = run_tool("run_shell", command="env", approve=True)
    assert "sk-very-secret" not in result.output and "ghp-secret" not in result.output
    assert "HARMLESS=visible" in result.output


def test_no_program_the_workspace_ships_is_found_on_path(
    run_tool: RunTool, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository's `node_modules/.bin/ls`, or a `./ls` reached through a `.` or an empty
    PATH entry, is not what an unasked `ls` runs: an honest model's `ls` ran the planted
    one."""
    planted = workspace / "node_modules" / ".bin"
    planted.mkdir(parents=True)
    for folder in (planted, workspace):
        (folder / "ls").write_text("#!/bin/sh\necho PLANTED\n")
        (folder / "ls").chmod(0o755)
    system_path = os.environ.get("PATH", os.defpath)
    monkeypatch.setenv("PATH", f"{planted}::.:node_modules/.bin:{system_path}")
    result = run_tool("run_shell", command="ls node_modules", approve=True)
    assert "PLANTED" not in result.output and "[exit code 0" in result.output
    # A command the user approved runs on their PATH, as they would run it themselves
    # (their venv's `pytest`): here, what they put first on it.
    approved = run_tool("run_shell", command="FOO=1 ls node_modules", approve=True)
    assert "PLANTED" in approved.output


def test_no_input_can_be_waited_for(run_tool: RunTool) -> None:
    result = run_tool("run_shell", command="cat", timeout=5)
    assert "[exit code 0;" in result.output


def test_bad_arguments_are_the_models_to_fix(run_tool: RunTool) -> None:
    assert "timeout" in run_tool("run_shell", command="ls", timeout=100000).output
    assert "command is empty" in run_tool("run_shell", command="  ").output
