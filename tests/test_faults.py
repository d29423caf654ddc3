"""Faults end cleanly: each drives the real CLI against a local fake endpoint, injects one
fault, and expects a named reason, whole log lines and the right exit code."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import must_run_here
from tests.fake_openai import FakeOpenAI, Reply, error_reply
from tests.helpers import gaffer, gaffer_replying, outcome_line, trust_workspace
from workers.calls import MAX_CALLS_PER_REPLY
from workers.model.replies import MAX_CALLS_READ


def test_a_plugin_that_exits_at_import_is_skipped_and_the_run_goes_on(workspace: Path) -> None:
    folder = workspace / ".gaffer" / "tools"
    folder.mkdir(parents=True)
    (folder / "exits.py").write_text("import sys\nsys.exit(3)\n")
    trust_workspace(workspace)
    done, _ = gaffer_replying(workspace, "run", "--no-verify", "hello", replies=[Reply(text="hi")])
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi\n"
    [line] = [line for line in done.stderr.splitlines() if "exits.py" in line]
    assert "skipped: it called sys.exit(3) at import" in line


def test_a_long_retry_after_ends_the_run_at_once_with_the_reason(workspace: Path) -> None:
    started = time.monotonic()
    done, server = gaffer_replying(
        workspace, "run", "hello", replies=[error_reply(429, "slow", **{"Retry-After": "1000"})]
    )
    assert time.monotonic() - started < 15 and len(server.requests) == 1
    assert done.returncode == 1
    line = outcome_line(done.stderr)
    assert "asks to wait 1000 s before the next try (Retry-After)" in line


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("request_timeout = inf", "request_timeout: Input should be a finite number"),
        ("request_timeout = 99999", "request_timeout: Input should be less than or equal to 3600"),
        ("max_parallel = 0", "max_parallel: Input should be greater than or equal to 1"),
        ("temperature = 5.0", "temperature: Input should be less than or equal to 2"),
        ("context_window = 10", "context_window: Input should be greater than or equal to 1024"),
        ('log_dir = "logs"', "'log_dir' cannot be set in this file"),
        ("sandbox_uid = 0", "'sandbox_uid' cannot be set in this file"),
        ('api_key_file = "/etc/passwd"', "'api_key_file' cannot be set in this file"),
    ],
)
def test_a_workspace_config_value_that_cannot_work_is_refused_by_file_and_key(
    workspace: Path, line: str, says: str
) -> None:
    (workspace / ".gaffer").mkdir()
    (workspace / ".gaffer" / "config.toml").write_text(line + "\n")
    trust_workspace(workspace)
    done, server = gaffer_replying(workspace, "run", "hello", replies=[Reply(text="hi")])
    assert done.returncode == 1 and not server.requests
    message = outcome_line(done.stderr)
    assert ".gaffer/config.toml" in message and says in message


def test_an_api_key_file_is_read_and_a_missing_one_is_named(workspace: Path) -> None:
    key_file = workspace.parent / "key"
    key_file.write_text("sk-from-file\n")
    done, server = gaffer_replying(
        workspace,
        "run",
        "--no-verify",
        "hello",
        replies=[Reply(text="hi")],
        env={"OPENAI_API_KEY": "", "GAFFER_API_KEY_FILE": str(key_file)},
    )
    assert done.returncode == 0, done.stderr
    assert server.headers[0]["authorization"] == "Bearer sk-from-file"
    missing, _ = gaffer_replying(
        workspace,
        "run",
        "hello",
        replies=[],
        env={"OPENAI_API_KEY": "", "GAFFER_API_KEY_FILE": str(key_file) + ".gone"},
    )
    assert missing.returncode == 1
    assert "environment variable GAFFER_API_KEY_FILE: api_key_file: cannot read" in missing.stderr


def test_credentials_in_the_endpoint_url_never_reach_the_log_or_stderr(workspace: Path) -> None:
    with FakeOpenAI([error_reply(401, "who are you")]) as server:
        url = server.base_url.replace("http://", "http://alice:s3cretpass@") + "?key=k3y-in-query"
        done = gaffer(workspace, "run", "hello", server=server, env={"OPENAI_BASE_URL": url})
    assert done.returncode == 1 and "refused the API key (401)" in done.stderr
    logged = "".join(p.read_text() for p in (workspace.parent / "logs").glob("*.jsonl"))
    for secret in ("s3cretpass", "alice", "k3y-in-query"):
        assert secret not in done.stderr and secret not in logged and secret not in done.stdout
    assert "***@127.0.0.1" in logged


def test_an_api_key_on_the_command_line_is_warned_about(workspace: Path) -> None:
    done, _ = gaffer_replying(
        workspace, "run", "--api-key", "sk-cli", "--no-verify", "hi", replies=[Reply(text="hi")]
    )
    assert done.returncode == 0
    assert "--api-key shows the key to every user of this machine" in done.stderr


def test_a_catastrophic_regex_without_ripgrep_ends_within_the_run_s_time(workspace: Path) -> None:
    (workspace / "evil.txt").write_text("a" * 40 + "!\n")
    grep = Reply(tool_calls=[("grep", json.dumps({"pattern": "(a+)+$"}))])
    started = time.monotonic()
    done, _ = gaffer_replying(
        workspace,
        "run",
        "--profile",
        "explorer",
        "--max-seconds",
        "10",
        "--no-verify",
        "look",
        replies=[grep, Reply(text="nothing found")],
        env={"GAFFER_GREP": "python"},  # no ripgrep: the Python fallback runs
    )
    assert time.monotonic() - started < 20
    assert done.returncode == 2 and "time limit" in done.stderr, "a named reason"
    logged = [
        json.loads(line)
        for p in (workspace.parent / "logs").glob("*.jsonl")
        for line in p.read_text().splitlines()
    ]
    [call] = [r for r in logged if r["event"] == "tool_call"]
    assert "stopped at its time limit" in call["content"]
    assert logged[-1]["event"] == "session_end"


def test_a_stream_that_only_keeps_alive_ends_at_request_timeout(workspace: Path) -> None:
    config = workspace.parent / "home" / ".config" / "gaffer"
    config.mkdir(parents=True)
    (config / "config.toml").write_text("request_timeout = 2\nmax_attempts = 1\n")
    started = time.monotonic()
    done, _ = gaffer_replying(
        workspace, "run", "hello", replies=[Reply(text="late", keep_alive_for=60)]
    )
    assert time.monotonic() - started < 10
    assert done.returncode == 1 and "no whole reply within 2 s" in done.stderr


def test_a_trickling_stream_ends_at_the_run_s_wall_clock(workspace: Path) -> None:
    trickle = Reply(text="x" * 200, chunk_size=1, drip_s=0.5)
    started = time.monotonic()
    done, _ = gaffer_replying(workspace, "run", "--max-seconds", "3", "hello", replies=[trickle])
    assert time.monotonic() - started < 8, "the deadline held within 2 s of the limit"
    assert done.returncode == 2 and "time" in done.stderr
    logged = [
        json.loads(line)
        for p in (workspace.parent / "logs").glob("*.jsonl")
        for line in p.read_text().splitlines()
    ]
    assert logged[-1]["event"] == "session_end"


def test_a_non_utf8_file_name_round_trips_through_tools_the_log_and_resume(
    workspace: Path,
) -> None:
    name = os.fsdecode(b"caf\xe9.txt")
    (workspace / name).write_text("coffee\n")
    find = Reply(tool_calls=[("find_files", json.dumps({"pattern": "caf*"}))])
    read = Reply(tool_calls=[("read_file", json.dumps({"path": "caf\\xe9.txt"}))])
    done, server = gaffer_replying(
        workspace,
        "run",
        "--profile",
        "explorer",
        "--no-verify",
        "look",
        replies=[find, read, Reply(text="it holds coffee")],
    )
    assert done.returncode == 0, done.stderr
    sent = json.dumps(server.requests)
    assert "caf\\\\xe9.txt" in sent, "shown escaped"
    assert "coffee" in json.dumps(server.requests[-1]), "and read back by that name"
    again, _ = gaffer_replying(
        workspace, "run", "--resume", "last", "--no-verify", "and now?", replies=[Reply(text="ok")]
    )
    assert again.returncode == 0, again.stderr


def test_an_unusable_log_folder_is_one_line_before_the_run(workspace: Path) -> None:
    blocker = workspace.parent / "not-a-folder"
    blocker.write_text("a file where the logs would go\n")
    done, server = gaffer_replying(
        workspace, "run", "hello", replies=[Reply(text="hi")], env={"GAFFER_LOG_DIR": str(blocker)}
    )
    assert done.returncode == 1 and not server.requests
    [line] = done.stderr.strip().splitlines()
    assert f"cannot write the run log in {blocker}" in line


def test_a_disk_that_fills_mid_run_keeps_the_answer_and_says_so(workspace: Path) -> None:
    if os.geteuid() != 0:
        must_run_here("mounting a small tmpfs needs root")
    full = workspace.parent / "small"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(full)], check=True)
    try:
        # a reply whose log line cannot fit in 16 KB (and no loop, which would be cut)
        big = " ".join(map(str, range(8_000)))
        done, _ = gaffer_replying(
            workspace,
            "run",
            "--no-verify",
            "hello",
            replies=[Reply(text=big)],
            env={"GAFFER_LOG_DIR": str(full)},
        )
    finally:
        subprocess.run(["umount", str(full)], check=False)
    assert done.stdout == big + "\n", "the answer reaches stdout"
    assert done.returncode == 74
    line = outcome_line(done.stderr)
    assert "the answer is above, but the run log stopped at" in line and "No space left" in line
    assert "Traceback" not in done.stderr


def test_a_reply_of_five_thousand_calls_runs_the_first_few_and_answers_the_rest(
    workspace: Path,
) -> None:
    calls = [("find_files", json.dumps({"pattern": f"f{n}*"})) for n in range(5000)]
    started = time.monotonic()
    done, server = gaffer_replying(
        workspace,
        *("run", "--no-verify", "--max-seconds", "60", "look"),
        replies=[Reply(tool_calls=calls, chunk_size=4000), Reply(text="nothing there")],
    )
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 50, "read and answered in linear time"
    [log] = (workspace.parent / "logs").glob("*.jsonl")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len([r for r in lines if r["event"] == "tool_call"]) == MAX_CALLS_PER_REPLY
    answers = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(answers) == MAX_CALLS_READ, "every call read has its answer; the rest unread"
    assert answers[-1]["content"].startswith("not run: a reply may make at most 64 calls")
