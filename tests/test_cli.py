"""`gaffer run`, `gaffer logs` and `gaffer stats` as a user runs them, against a real local server."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fake_openai import FakeOpenAI, Reply, error_reply
from tests.helpers import (
    add_host_coder,
    gaffer,
    interrupted_run,
    kill_9_mid_run,
    outcome_line,
)

REQUIRED = {"ts", "event", "session_id", "agent_id"}


def log_lines(workspace: Path) -> list[dict[str, object]]:
    (path,) = (workspace.parent / "logs").glob("*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_run_prints_the_answer_on_stdout_and_progress_on_stderr(workspace: Path) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    edit = json.dumps({"path": "calc.py", "old_text": "a - b", "new_text": "a + b"})
    replies = [
        Reply(text="Let me look.", tool_calls=[("read_file", '{"path": "calc.py"}')]),
        Reply(tool_calls=[("edit_file", edit)]),
        Reply(text="Fixed add() in calc.py."),
    ]
    add_host_coder(workspace)
    with FakeOpenAI(replies) as server:
        done = gaffer(
            workspace, "run", "--profile", "hostcoder", "--no-verify", "fix add", server=server
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Fixed add() in calc.py.\n"
    assert "Let me look." in done.stderr
    assert "[step 1] read_file calc.py → lines 1-2 of 2" in done.stderr
    assert "[step 2] edit_file calc.py → replaced 1 match" in done.stderr
    assert "\x1b[" not in done.stderr  # plain text when not a TTY
    assert (workspace / "calc.py").read_text().endswith("a + b\n")
    assert server.requests[0]["messages"][1] == {"role": "user", "content": "fix add"}
    system = server.requests[0]["messages"][0]["content"]
    assert system.startswith(f"You edit code in {workspace}.\n\n# The workspace's code\n\n")
    assert "\n`calc.py`\n  1: function add" in system, "the repo map, in place of the glance"


def test_the_log_schema_on_a_real_run(workspace: Path) -> None:
    (workspace / "a.txt").write_text("x\n")
    replies = [
        Reply(tool_calls=[("read_file", '{"path": "a.txt"}'), ("list_dir", "{}")]),
        Reply(
            text="ok",
            timings={"prompt_n": 5, "prompt_ms": 123.4567, "predicted_n": 2, "predicted_ms": 80},
        ),
    ]
    with FakeOpenAI(replies) as server:
        assert gaffer(workspace, "run", "look", server=server).returncode == 0
    lines = log_lines(workspace)
    first, second = [line for line in lines if line["event"] == "llm_call"]
    assert "server_reply_s" not in first, "absent where the server did not say"
    assert (second["server_prompt_s"], second["server_reply_s"]) == (0.123, 0.08)
    assert all(line.keys() >= REQUIRED for line in lines)
    events = [line["event"] for line in lines]
    assert events[0] == "session_start" and events[-1] == "session_end"
    assert events.count("tool_call") == 2 and events.count("llm_call") == 2
    for line in lines:
        if line["event"] == "tool_call":
            assert {"name", "args", "is_error", "elapsed_s", "sandbox"} <= line.keys()
            assert line["sandbox"] == "host"
        if line["event"] == "llm_call":
            assert {
                "prompt_tokens",
                "completion_tokens",
                "elapsed_s",
                "attempt",
                "model",
            } <= line.keys()
    end = lines[-1]
    assert end["status"] == "completed" and end["tokens"] == 2 * (12 + 7) and end["tool_calls"] == 2


def test_retries_are_logged(workspace: Path) -> None:
    replies = [error_reply(429, "slow down", **{"Retry-After": "0"}), Reply(text="ok")]
    with FakeOpenAI(replies) as server:
        done = gaffer(workspace, "run", "x", server=server)
    assert done.returncode == 0
    retry = next(line for line in log_lines(workspace) if line["event"] == "llm_retry")
    assert retry["attempt"] == 1 and "429" in str(retry["error"]) and "wait_s" in retry
    assert (
        next(line for line in log_lines(workspace) if line["event"] == "llm_call")["attempt"] == 2
    )


def test_limit_exits_2_with_the_reason_on_stderr(workspace: Path) -> None:
    replies = [Reply(tool_calls=[("list_dir", "{}")]), Reply(text="what I have so far")]
    with FakeOpenAI(replies) as server:
        done = gaffer(workspace, "run", "--max-steps", "2", "x", server=server)
    assert done.returncode == 2
    assert done.stdout == "what I have so far\n"
    assert "gaffer: stopped: steps limit: used all 2 steps" in done.stderr


def test_max_steps_in_a_config_file_is_the_top_agent_s_limit(workspace: Path) -> None:
    (workspace / ".gaffer").mkdir()
    (workspace / ".gaffer" / "config.toml").write_text("max_steps = 2\n")
    replies = [Reply(tool_calls=[("list_dir", "{}")]), Reply(text="what I have so far")]
    with FakeOpenAI(replies) as server:
        done = gaffer(workspace, "run", "--trust-workspace", "x", server=server)
    assert done.returncode == 2
    assert "gaffer: stopped: steps limit: used all 2 steps" in done.stderr


def test_auth_error_exits_1_in_one_line_without_traceback(workspace: Path) -> None:
    with FakeOpenAI([error_reply(401, "Incorrect API key provided")]) as server:
        done = gaffer(workspace, "run", "x", server=server)
    assert done.returncode == 1
    assert done.stdout == ""
    last = outcome_line(done.stderr)
    assert last.startswith("gaffer: error:") and "refused the API key (401)" in last
    assert "Traceback" not in done.stderr
    assert len(server.requests) == 1


def test_unreachable_endpoint_exits_1(workspace: Path) -> None:
    (workspace / ".gaffer").mkdir()
    (workspace / ".gaffer" / "config.toml").write_text("max_attempts = 2\n")
    env = {
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OPENAI_API_KEY": "k",
        "GAFFER_TRUST_WORKSPACE": "1",
    }
    done = gaffer(workspace, "run", "x", env=env)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    # Nothing ever answered there: said at once, not after every attempt.
    assert "nothing is listening at 127.0.0.1:9 (connection refused)" in done.stderr


def test_bad_config_exits_1_naming_file_and_key(workspace: Path) -> None:
    (workspace / ".gaffer").mkdir()
    (workspace / ".gaffer" / "config.toml").write_text('modle = "x"\n')
    done = gaffer(workspace, "run", "--trust-workspace", "x")
    assert done.returncode == 1
    assert "config.toml: unknown key 'modle'" in done.stderr and "Traceback" not in done.stderr


def test_flags_override_env(workspace: Path) -> None:
    with FakeOpenAI([Reply(text="ok")]) as server:
        done = gaffer(workspace, "run", "--model", "flag-model", "x", server=server)
    assert done.returncode == 0
    assert server.requests[0]["model"] == "flag-model"


def test_denied_shell_command_without_yes_and_allowed_with_it(workspace: Path) -> None:
    add_host_coder(workspace)
    touch = [("run_shell", json.dumps({"command": "touch made.txt"}))]
    with FakeOpenAI([Reply(tool_calls=touch), Reply(text="done")]) as server:
        gaffer(workspace, "run", "--profile", "hostcoder", "x", server=server)
    assert not (workspace / "made.txt").exists()
    said = server.requests[1]["messages"][-1]["content"]
    assert said.startswith("not run: it asks first (`touch` is not on the read-only allowlist)")
    assert "pass --yes or --mode full-auto" in said, "a deny says how to allow it"
    with FakeOpenAI([Reply(tool_calls=touch), Reply(text="done")]) as server:
        done = gaffer(
            workspace, "run", "--profile", "hostcoder", "--yes", "--no-verify", "x", server=server
        )
        assert done.returncode == 0
    assert (workspace / "made.txt").exists()


def test_quiet_shows_only_the_outcome(workspace: Path) -> None:
    with FakeOpenAI(
        [Reply(text="streamed text", tool_calls=[("list_dir", "{}")]), Reply(text="ok")]
    ) as server:
        done = gaffer(workspace, "run", "--quiet", "x", server=server)
    assert done.returncode == 0 and done.stdout == "ok\n" and done.stderr == ""


def test_logs_and_stats_read_the_run_back(workspace: Path) -> None:
    with FakeOpenAI([Reply(tool_calls=[("list_dir", "{}")]), Reply(text="the answer")]) as server:
        gaffer(workspace, "run", "survey the repo", server=server)
    listing = gaffer(workspace, "logs")
    assert (
        listing.returncode == 0
        and "completed" in listing.stdout
        and "survey the repo" in listing.stdout
    )
    run_id = listing.stdout.split()[0]
    shown = gaffer(workspace, "logs", run_id[:12])
    assert shown.returncode == 0
    assert "task: survey the repo" in shown.stdout and "[step 1] list_dir" in shown.stdout
    assert "the answer" in shown.stdout
    stats = gaffer(workspace, "stats", run_id)
    assert stats.returncode == 0 and "list_dir" in stats.stdout and "completed" in stats.stdout
    missing = gaffer(workspace, "logs", "nonexistent")
    assert missing.returncode == 1 and "no run 'nonexistent'" in missing.stderr


def test_a_log_of_another_format_is_read_or_refused_by_its_version(workspace: Path) -> None:
    sample = Path(__file__).parent.parent / "logs" / "samples"
    (older,) = sample.glob("*.jsonl")  # written before logs said their format
    shown = gaffer(workspace, "logs", str(older))
    assert shown.returncode == 0 and "delegate" in shown.stdout
    newer = workspace.parent / "newer.jsonl"
    newer.write_text(json.dumps({"event": "session_start", "log_format": 99}) + "\n")
    for command in ("logs", "stats"):
        refused = gaffer(workspace, command, str(newer))
        assert refused.returncode == 1
        assert "log format 99, written by a newer gaffer" in refused.stderr
        assert "Traceback" not in refused.stderr


def test_a_profile_that_is_not_there_stops_the_run_before_anything_starts(
    workspace: Path,
) -> None:
    """No log, no MCP server, no local model: the profiles are checked first."""
    starts = {"command": "sh", "args": ["-c", "touch ../mcp-started; sleep 5"]}
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"m": starts}}))
    for flags in (["--profile", "nope"], ["--profiles", "explorer,nope"]):
        # no endpoint set: were it reached, the local model would be fetched
        done = gaffer(workspace, "run", "--trust-workspace", *flags, "t", timeout=20)
        assert done.returncode == 64, "a usage error"
        assert "nope" in done.stderr and "local model" not in done.stderr
    assert not (workspace.parent / "logs").exists()
    assert not (workspace.parent / "mcp-started").exists()


def test_kill_9_leaves_a_readable_log(workspace: Path) -> None:
    replies = [Reply(tool_calls=[("list_dir", "{}")]), Reply(text="slow", delay=30)]
    with FakeOpenAI(replies) as server:
        kill_9_mid_run(workspace, server, "x")
    lines = log_lines(workspace)
    assert [line["event"] for line in lines][:4] == [
        "session_start",
        "check_chosen",  # a run that could change files chooses its check first
        "user_message",
        "agent_start",
    ]
    assert any(line["event"] == "tool_call" for line in lines)
    assert "interrupted" in gaffer(workspace, "logs").stdout


def test_ctrl_c_exits_130(workspace: Path) -> None:
    proc, stderr, _ = interrupted_run(workspace, [Reply(text="slow", delay=30)], once_asked=1)
    assert proc.returncode == 130
    assert "interrupted" in stderr
    assert log_lines(workspace)[-1]["event"] == "session_end"


def test_the_gate_sends_an_unchecked_edit_back_then_lets_a_tested_one_through(
    workspace: Path,
) -> None:
    add_host_coder(workspace)
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (workspace / "Makefile").write_text("test:\n\tgrep -q 'a + b' calc.py\n")
    edit = json.dumps({"path": "calc.py", "old_text": "a - b", "new_text": "a + b"})
    replies = [
        Reply(tool_calls=[("read_file", '{"path": "calc.py"}'), ("edit_file", edit)]),
        Reply(text="Fixed it, trust me."),
        Reply(tool_calls=[("run_shell", json.dumps({"command": "make test"}))]),
        Reply(text="Fixed add(); make test passes."),
    ]
    with FakeOpenAI(replies) as server:
        done = gaffer(workspace, "run", "--profile", "hostcoder", "--yes", "fix add", server=server)
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout
        == "Fixed add(); make test passes.\n\nVerification: the agent's own test run passed (gaffer ran no check)\n"
    )
    sent_back = server.requests[2]["messages"][-1]
    assert sent_back["role"] == "user" and "no test ran after the last edit" in sent_back["content"]
    checks = [line for line in log_lines(workspace) if line["event"] == "verification"]
    assert [(c["verdict"], c["action"]) for c in checks] == [
        ("unverified", "sent_back"),
        ("verified", "accepted"),
    ]


def edit_then_keep_testing(workspace: Path) -> list[Reply]:
    """A model that edits, runs `make test`, and claims done each time it is sent back."""
    add_host_coder(workspace)
    (workspace / "calc.py").write_text("x = 1\n")
    edit = json.dumps({"path": "calc.py", "old_text": "x = 1", "new_text": "x = 2"})
    test = [("run_shell", json.dumps({"command": "make test"}))]
    return [Reply(tool_calls=[("read_file", '{"path": "calc.py"}'), ("edit_file", edit)])] + [
        Reply(tool_calls=test),
        Reply(text="done"),
    ] * 3


def test_a_failing_test_run_is_the_runs_shortfall_when_the_check_cannot_run(
    workspace: Path, tmp_path: Path
) -> None:
    """No Docker to run the check in: the check says nothing, and the change's own last
    test run, which failed, is what the run's end stands on (it exited 0 over it)."""
    replies = edit_then_keep_testing(workspace)
    (workspace / "Makefile").write_text("test:\n\tfalse\n")
    no_docker = {"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"}
    with FakeOpenAI(replies) as server:
        done = gaffer(
            workspace, "run", "--profile", "hostcoder", "--yes", "x", server=server, env=no_docker
        )
    assert "gaffer checked the change: unchecked: no Docker" in done.stderr
    assert done.returncode == 3, done.stderr
    assert "answered, but the change failed its own checks: the last test run failed" in (
        done.stderr
    )


def test_a_grep_that_finds_nothing_after_passing_tests_is_no_failure_of_the_change(
    workspace: Path, tmp_path: Path
) -> None:
    """No Docker for the check; the agent's tests passed, then a grep found nothing
    (exit 1): the change is unverified, not failed, and the run exits 0."""
    add_host_coder(workspace)
    (workspace / "calc.py").write_text("x = 1\n")
    (workspace / "Makefile").write_text("test:\n\ttrue\n")
    edit = json.dumps({"path": "calc.py", "old_text": "x = 1", "new_text": "x = 2"})
    shell = "run_shell"
    replies = [
        Reply(tool_calls=[("read_file", '{"path": "calc.py"}'), ("edit_file", edit)]),
        Reply(tool_calls=[(shell, json.dumps({"command": "make test"}))]),
        Reply(tool_calls=[(shell, json.dumps({"command": "grep -n TODO calc.py"}))]),
    ] + [Reply(text="done")] * 3
    no_docker = {"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"}
    with FakeOpenAI(replies) as server:
        done = gaffer(
            workspace, "run", "--profile", "hostcoder", "--yes", "x", server=server, env=no_docker
        )
    assert done.returncode == 0, done.stderr
    checks = [line for line in log_lines(workspace) if line["event"] == "verification"]
    assert checks[-1]["action"] == "accepted" and "failed" not in checks[-1]
    assert "grep -n TODO calc.py" in checks[-1]["reason"]


def test_a_failing_test_is_not_verified(workspace: Path) -> None:
    replies = edit_then_keep_testing(workspace)
    (workspace / "Makefile").write_text("test:\n\tfalse\n")
    with FakeOpenAI(replies) as server:
        done = gaffer(workspace, "run", "--profile", "hostcoder", "--yes", "x", server=server)
    assert done.returncode == 3, "the answer went out over a failing test run"
    # gaffer ran the project's `make test` itself when the agent answered, and at the end:
    # its verdict is the answer's and the run's.
    assert done.stdout.endswith(
        "Check: failed: `make test` (exit 2); make: *** [Makefile:2: test] Error 1\n"
    )
    assert "answered, but the check failed: `make test`" in done.stderr


def test_a_denied_test_command_counts_as_not_run(workspace: Path) -> None:
    replies = edit_then_keep_testing(workspace)
    with FakeOpenAI(replies) as server:
        done = gaffer(workspace, "run", "--profile", "hostcoder", "x", server=server)
    assert (
        "Verification: unverified (files were changed and no test ran after the last edit)"
        in done.stdout
    )


def test_no_verify_turns_the_gate_off(workspace: Path) -> None:
    add_host_coder(workspace)
    (workspace / "calc.py").write_text("x = 1\n")
    edit = json.dumps({"path": "calc.py", "old_text": "x = 1", "new_text": "x = 2"})
    with FakeOpenAI([Reply(tool_calls=[("edit_file", edit)]), Reply(text="done")]) as server:
        done = gaffer(workspace, "run", "--profile", "hostcoder", "--no-verify", "x", server=server)
    assert done.stdout == "done\n"
    assert not [line for line in log_lines(workspace) if line["event"] == "verification"]


def test_ctrl_c_cancels_running_workers_and_the_log_says_so(workspace: Path) -> None:
    batch = [
        ("delegate", json.dumps({"profile": "explorer", "task": "look at a"})),
        ("delegate", json.dumps({"profile": "explorer", "task": "look at b"})),
    ]
    replies = [
        Reply(tool_calls=batch),
        Reply(text="slow a", delay=30),
        Reply(text="slow b", delay=30),
    ]
    proc, stderr, took = interrupted_run(workspace, replies, once_asked=3)
    assert proc.returncode == 130 and "interrupted" in stderr
    assert took < 15
    lines = log_lines(workspace)
    ends = [line for line in lines if line["event"] == "delegate_end"]
    assert sorted(str(e["status"]) for e in ends) == ["cancelled", "cancelled"]
    assert lines[-1]["event"] == "session_end" and lines[-1]["status"] == "cancelled"


def test_make_install_puts_gaffer_on_the_path_and_says_so(tmp_path: Path) -> None:
    from supervisor.on_path import put_on_path

    target = tmp_path / "clone" / ".venv" / "bin" / "gaffer"
    home = tmp_path / "home"
    said = put_on_path(target, home, "/usr/bin")
    link = home / ".local" / "bin" / "gaffer"
    assert link.is_symlink() and link.readlink() == target
    assert said.startswith(f"gaffer: linked {link} → {target}")
    assert "is not on your PATH: add it" in said
    again = put_on_path(target, home, f"/usr/bin:{home}/.local/bin")
    assert again == f"gaffer: {link} already points to {target}"
    other = put_on_path(tmp_path / "elsewhere" / "gaffer", home, "")
    assert "is not this clone's: left as it is" in other and link.readlink() == target
