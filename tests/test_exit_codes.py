"""Exit codes that tell the truth, through the real CLI against a scripted endpoint: 0
only when the run finished and nothing it started failed (README's exit-code table)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fake_openai import FakeOpenAI, Reply, error_reply
from tests.helpers import add_host_coder, gaffer


def delegating(task: str) -> Reply:
    return Reply(tool_calls=[("delegate", json.dumps({"profile": "explorer", "task": task}))])


def test_an_answer_after_a_failed_worker_exits_3_naming_it(workspace: Path) -> None:
    replies = [delegating("look around"), Reply(text="The worker could not look.")]
    routes = {"look around": [error_reply(400, "this model cannot do that")]}
    with FakeOpenAI(replies, routes) as server:
        done = gaffer(workspace, "run", "--output-format", "json", "survey it", server=server)
    assert done.returncode == 3, done.stderr
    result = json.loads(done.stdout)
    assert result["answer"] == "The worker could not look."
    assert result["exit_code"] == 3 and result["status"] == "completed"
    assert [w["status"] for w in result["workers"]] == ["failed"]
    assert "gaffer: answered, but worker w1 (explorer) ended failed:" in done.stderr


def test_an_answer_after_a_denied_command_exits_3(workspace: Path) -> None:
    add_host_coder(workspace)
    replies = [
        Reply(tool_calls=[("run_shell", json.dumps({"command": "rm -rf build"}))]),
        Reply(text="I could not clean the build folder."),
    ]
    with FakeOpenAI(replies) as server:
        done = gaffer(workspace, "run", "--profile", "hostcoder", "clean up", server=server)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "I could not clean the build folder.\n"
    assert "answered, but supervisor's command was denied: rm -rf build" in done.stderr


def test_an_unverified_change_exits_4_only_under_require_verified(workspace: Path) -> None:
    add_host_coder(workspace)
    (workspace / "calc.py").write_text("x = 1\n")
    edit = json.dumps({"path": "calc.py", "old_text": "x = 1", "new_text": "x = 2"})
    script = [
        Reply(tool_calls=[("read_file", '{"path": "calc.py"}')]),
        Reply(tool_calls=[("edit_file", edit)]),
        *[Reply(text="Changed x.")] * 3,  # sent back twice for a test run, then accepted
    ]
    for flags, code in (([], 0), (["--require-verified"], 4)):
        (workspace / "calc.py").write_text("x = 1\n")
        with FakeOpenAI(list(script)) as server:
            done = gaffer(
                workspace, "run", "--profile", "hostcoder", *flags, "set x", server=server
            )
        assert done.returncode == code, done.stderr
        assert "Verification: unverified" in done.stdout
    assert "answered, but the change is unverified:" in done.stderr
