"""The run's check inside the loop (workers/check/checker.py through the gate): an agent
that changed files and answers has gaffer run the check over its change; a failure goes
back to it, a worker's verdict reaches its supervisor, and a chat's turn that changed
files ends with it. Through the CLI as a user runs it, a scripted model, real Docker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.docker_support import require_docker
from tests.fake_openai import FakeOpenAI, Reply
from tests.helpers import gaffer, gaffer_replying, read_then_write, trust_workspace
from tests.test_run_check import RIGHT, TASK, TESTS, WRONG, run, workspace


@pytest.fixture(autouse=True)
def docker() -> None:
    require_docker()


def checks(log: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return [line for line in lines if line["event"] == "check"]


def told(server: FakeOpenAI, words: str) -> bool:
    """Whether a request to the model carried `words` in a message."""
    return any(words in json.dumps(body.get("messages", [])) for body in server.requests)


def test_a_failed_check_goes_back_to_the_agent_and_its_fix_is_verified(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"even.py": "def is_even(n):\n    pass\n", "even_test.py": TESTS})
    replies = [
        read_then_write("even.py", WRONG),
        Reply(text="Done."),
        read_then_write("even.py", RIGHT),
        Reply(text="Fixed now."),
    ]
    code, result, stderr = run(ws, replies)
    assert code == 0, stderr
    assert result["verified"] is True
    assert (
        result["answer"]
        .rstrip()
        .endswith("Check: verified: `python3 -m pytest -q even_test.py` (2 passed)")
    )
    assert result["result"] == "Fixed now.", "a script's result is the answer alone"
    seen = checks(Path(result["log"]))
    assert [c["verdict"] for c in seen] == ["failed", "verified", "verified"]
    assert seen[0]["failed"] == 1 and "test_three" in seen[0]["detail"]
    assert seen[-1].get("reused") is True, "the run's end over the same tree runs nothing again"


def test_the_agent_is_told_the_first_failure(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"even.py": "def is_even(n):\n    pass\n", "even_test.py": TESTS})
    replies = [read_then_write("even.py", WRONG), Reply(text="Done."), Reply(text="Done.")]
    with FakeOpenAI(replies) as server:
        done = gaffer(
            ws, "run", "--profile", "hostcoder", "--output-format", "json", TASK,
            server=server, timeout=180,
        )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert told(server, "gaffer ran the check `python3 -m pytest -q even_test.py`")
    assert told(server, "1 failed, 1 passed")
    assert told(server, "test_three")


def test_a_worker_s_failed_check_reaches_its_supervisor(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"even.py": "def is_even(n):\n    pass\n", "even_test.py": TESTS})
    worker = [read_then_write("even.py", WRONG), *[Reply(text="Done, the tests pass.")] * 3]
    delegate = Reply(
        tool_calls=[("delegate", json.dumps({"profile": "hostcoder", "task": "fix is_even"}))]
    )
    top = [delegate, *[Reply(text="All fixed; the tests pass.")] * 3]
    profile = ws / ".gaffer" / "profiles" / "boss.toml"
    profile.write_text(
        'name = "boss"\ndescription = "Hands the work to a coder."\ntools = ["delegate"]\n'
        'system_prompt = "You delegate."\n'
    )
    trust_workspace(ws)
    done, server = gaffer_replying(
        ws, "run", "--profile", "boss", "--output-format", "json", TASK,
        replies=top, routes={"fix is_even": worker},
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    result = json.loads(done.stdout)
    assert result["check"]["verdict"] == "failed"
    assert "Check: failed" in result["answer"], "the supervisor's answer is not passed on as it is"
    assert told(server, "check (run by gaffer): failed: `python3 -m pytest -q even_test.py`"), (
        "the worker's report to its supervisor carries its verdict"
    )
    seen = checks(Path(result["log"]))
    assert any(c.get("agent_id") != "supervisor" and c["verdict"] == "failed" for c in seen)


def test_a_chat_turn_that_changed_files_ends_with_the_check(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"even.py": "def is_even(n):\n    pass\n", "even_test.py": TESTS})
    replies = [Reply(text="Hello."), read_then_write("even.py", RIGHT), Reply(text="Fixed.")]
    with FakeOpenAI(replies) as server:
        done = gaffer(
            ws, "chat", "--profile", "hostcoder", server=server, timeout=180,
            stdin="hi\n" + TASK + "\n/exit\n",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("Check: verified: `python3 -m pytest -q even_test.py`") == 1, (
        "the turn that said hello changed nothing and is not checked"
    )


def test_logs_stats_and_the_timeline_show_the_check(tmp_path: Path) -> None:
    from supervisor.runlog import read_records
    from supervisor.timeline import build
    from supervisor.timeline_outcome import CHECK_FAILED

    ws = workspace(tmp_path, {"even.py": "def is_even(n):\n    pass\n", "even_test.py": TESTS})
    replies = [read_then_write("even.py", WRONG), *[Reply(text="Done.")] * 3]
    code, result, _ = run(ws, replies)
    assert code == 3
    logs = gaffer(ws, "logs", "last").stdout
    assert "check failed: `python3 -m pytest -q even_test.py` (1 failed, 1 passed)" in logs
    assert "(unchanged since the last: not run again)" in logs
    stats = gaffer(ws, "stats", "last", env={"COLUMNS": "200"}).stdout
    assert "checks (run by gaffer)" in stats and "failed (reused)" in stats
    log = Path(result["log"])
    outcome = build(read_records(log), log).outcome
    assert (outcome.tone, outcome.meaning) == ("red", CHECK_FAILED)
    assert outcome.verdict.checked and outcome.verdict.verdict == "failed"
    assert outcome.verdict.reason.startswith("failed: `python3 -m pytest -q even_test.py`")


def test_tests_after_writes_start_from_the_check_whatever_the_task_says(tmp_path: Path) -> None:
    """A small model's aids run the tests after its writes: the run's check, here given
    with --check to a task that names no command."""
    ws = workspace(tmp_path, {"even.py": "def is_even(n):\n    pass\n", "even_test.py": TESTS})
    config = tmp_path / "home" / ".config" / "gaffer"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("file_blocks = true\n")
    replies = [read_then_write("even.py", RIGHT), Reply(text="Fixed.")]
    command = "python3 -m pytest -q even_test.py"
    code, result, stderr = run(ws, replies, "--yes", "--check", command, task="Make is_even right.")
    assert code == 0, stderr
    lines = [json.loads(line) for line in Path(result["log"]).read_text().splitlines()]
    shells = [r for r in lines if r["event"] == "tool_call" and r["name"] == "run_shell"]
    assert [s["args"]["command"] for s in shells] == [command], "gaffer ran it as the agent"
    assert "2 passed" in shells[0]["content"]


def test_the_run_says_its_check_as_it_starts(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"even.py": "def is_even(n):\n    pass\n", "even_test.py": TESTS})
    code, result, stderr = run(ws, [read_then_write("even.py", RIGHT), Reply(text="Fixed.")])
    assert code == 0
    first = stderr.splitlines()[0]
    assert first == "gaffer: check: `python3 -m pytest -q even_test.py` (named in the task)"
    assert "gaffer checked the change: verified: `python3 -m pytest -q even_test.py`" in stderr
    lines = [json.loads(line) for line in Path(result["log"]).read_text().splitlines()]
    [chosen] = [r for r in lines if r["event"] == "check_chosen"]
    assert (chosen["command"], chosen["source"]) == ("python3 -m pytest -q even_test.py", "task")
