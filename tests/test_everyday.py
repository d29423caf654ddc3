"""Everyday use, as a first-time user meets it: which endpoint runs, how fast a wrong
one is said, usage errors, and what a script reads from gaffer."""

from __future__ import annotations

import hashlib
import json
import socket
import time
from pathlib import Path
from typing import Any, cast

import pytest

from supervisor import run_setup, settings
from supervisor.costs import dollars, price_of, prices_with
from supervisor.settings import Price
from tests.fake_openai import FakeOpenAI, Reply
from tests.helpers import add_host_coder, gaffer, gaffer_replying, outcome_line
from workers import state


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("env", "local"),
    [
        ({"OPENAI_API_KEY": "sk-x"}, False),  # a key alone: OpenAI's endpoint, as its SDK does
        ({"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}, False),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "OPENAI_API_KEY": "sk-x"}, False),
        ({}, True),  # neither: the bundled local model
    ],
    ids=["key only", "base URL only", "both", "neither"],
)
def test_which_endpoint_runs(
    env: dict[str, str], local: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GAFFER_MODEL"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    config = settings.load({})
    assert run_setup.uses_local_model(config, use_local=False) is local
    assert run_setup.uses_local_model(config, use_local=True)


def test_a_model_without_an_endpoint_is_refused_not_ignored(workspace: Path) -> None:
    done = gaffer(workspace, "run", "--model", "gpt-4o", "hello", env={"OPENAI_API_KEY": ""})
    assert done.returncode == 1
    assert "the model 'gpt-4o' needs an endpoint: set OPENAI_BASE_URL" in done.stderr


def test_a_closed_port_fails_within_seconds_with_a_hint(workspace: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    started = time.monotonic()
    done = gaffer(workspace, "run", "hello", env={"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "k"})
    assert time.monotonic() - started < 5
    assert done.returncode == 1
    line = outcome_line(done.stderr)
    host_port = url.removeprefix("http://").removesuffix("/v1")
    assert f"nothing is listening at {host_port} (connection refused)" in line


def test_a_server_that_is_not_openai_compatible_fails_at_once_with_a_hint(
    workspace: Path,
) -> None:
    with FakeOpenAI([Reply(status=501, error={"message": "Unsupported method"})] * 6) as server:
        started = time.monotonic()
        done = gaffer(
            workspace, "run", "hello", server=server, env={"OPENAI_BASE_URL": server.base_url[:-3]}
        )
        assert time.monotonic() - started < 5 and len(server.requests) == 1
    assert done.returncode == 1
    assert "does not serve the Chat Completions API (HTTP 501" in done.stderr
    assert f"did you mean {server.base_url[:-3]}/v1?" in done.stderr


def test_a_missing_key_is_said_to_be_missing(workspace: Path) -> None:
    with FakeOpenAI([Reply(status=401, error={"message": "no key"})]) as server:
        done = gaffer(workspace, "run", "hello", server=server, env={"OPENAI_API_KEY": ""})
    assert done.returncode == 1
    assert "asks for an API key and none is set: set OPENAI_API_KEY" in done.stderr


def test_a_busy_server_on_the_first_call_is_still_retried(workspace: Path) -> None:
    from tests.fake_openai import error_reply

    done, server = gaffer_replying(
        workspace,
        "run",
        "--no-verify",
        "hello",
        replies=[error_reply(503, "busy"), Reply(text="fine")],
    )
    assert done.returncode == 0 and len(server.requests) == 2


def test_usage_errors_exit_64_and_h_works_everywhere(workspace: Path) -> None:
    mistyped = gaffer(workspace, "run", "--max-stpes", "3", "hello")
    assert mistyped.returncode == 64 and "No such option" in mistyped.stderr
    for args in (
        ["-h"],
        ["run", "-h"],
        ["logs", "-h"],
        ["diff", "-h"],
        ["sandbox", "doctor", "-h"],
    ):
        shown = gaffer(workspace, *args)
        assert shown.returncode == 0 and "Usage:" in shown.stdout, args


def test_an_empty_task_or_an_empty_stdin_is_refused(workspace: Path) -> None:
    empty = gaffer(workspace, "run", "  ")
    assert empty.returncode == 64 and "the task is empty" in empty.stderr
    nothing = gaffer(workspace, "run", "-", stdin="")
    assert nothing.returncode == 64 and "stdin is empty" in nothing.stderr


def test_the_task_from_stdin_and_stdin_as_context(workspace: Path) -> None:
    with FakeOpenAI([Reply(text="ok"), Reply(text="ok")]) as server:
        from_stdin = gaffer(workspace, "run", "--no-verify", "-", server=server, stdin="say ok\n")
        with_context = gaffer(
            workspace, "run", "--no-verify", "explain this", server=server, stdin="E  boom\n"
        )
    assert from_stdin.returncode == 0 and with_context.returncode == 0
    first, second = (json.dumps(r["messages"]) for r in server.requests)
    assert "say ok" in first
    assert "explain this" in second and "<stdin>\\nE  boom\\n</stdin>" in second


def test_gaffer_s_own_files_stay_out_of_git(tmp_path: Path) -> None:
    import subprocess

    workspace = tmp_path / "repo"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "app.py").write_text("x = 1\n")
    done, _ = gaffer_replying(
        workspace,
        "run",
        "--no-verify",
        "hello",
        replies=[Reply(text="hi")],
        env={"GAFFER_LOG_DIR": ""},
    )
    assert done.returncode == 0, done.stderr
    assert not (workspace / ".gaffer").exists(), "gaffer writes nothing of its own here"
    logs = state.workspace_dir(workspace, state.LOGS)
    assert list(logs.glob("*.jsonl")), "the run's log is in the user's state folder"
    for folder in (state.root(), logs.parent, logs):
        assert folder.stat().st_mode & 0o777 == 0o700
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=workspace,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status.strip() == "?? app.py"


def test_remember_alone_is_not_a_code_change_to_verify(workspace: Path) -> None:
    from tests.helpers import add_host_coder

    add_host_coder(workspace)
    profile = workspace / ".gaffer" / "profiles" / "hostcoder.toml"
    profile.write_text(profile.read_text().replace('"run_shell"]', '"run_shell", "remember"]'))
    note = Reply(tool_calls=[("remember", json.dumps({"content": "tests run with pytest -q"}))])
    done, server = gaffer_replying(
        workspace,
        "run",
        "--profile",
        "hostcoder",
        "--trust-workspace",
        "remember how the tests run",
        replies=[note, Reply(text="Noted in AGENT.md.")],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Noted in AGENT.md.\n" and len(server.requests) == 2
    assert "tests run with pytest -q" in (workspace / "AGENT.md").read_text()


def json_result(workspace: Path, replies: list[Reply]) -> dict[str, Any]:
    """`gaffer run --output-format json hello` against these replies: its result object."""
    done, _ = gaffer_replying(
        workspace, "run", "--no-verify", "--output-format", "json", "hello", replies=replies
    )
    assert done.returncode == 0, done.stderr
    return cast(dict[str, Any], json.loads(done.stdout))


def test_output_format_json_is_one_object_a_script_can_read(workspace: Path) -> None:
    result = json_result(
        workspace, [Reply(tool_calls=[("list_dir", "{}")]), Reply(text="hi there")]
    )
    assert result["answer"] == "hi there" and result["status"] == "completed"
    assert result["exit_code"] == 0 and result["tokens"] > 0 and result["steps"] == 2
    assert Path(result["log"]).is_file() and result["files_changed"] == []
    # What a script written for `claude -p --output-format json` reads, by the same names.
    assert result["type"] == "result" and result["subtype"] == "success"
    assert result["is_error"] is False and result["result"] == "hi there"
    assert result["num_turns"] == 2 and result["duration_ms"] > 0
    assert result["usage"] == {
        "input_tokens": 24,
        "output_tokens": 14,
        "cache_read_input_tokens": 0,
    }
    assert result["total_cost_usd"] is None, "no price is known for the model"
    assert result["permission_denials"] == [] and result["verification"] is None


def test_the_json_result_costs_the_run_from_the_price_table(workspace: Path) -> None:
    home = workspace.parent / "home" / ".config" / "gaffer"
    home.mkdir(parents=True)
    (home / "config.toml").write_text(
        '[prices."fake-model"]\ninput = 0.4\noutput = 1.6\ncached_input = 0.1\n'
    )
    result = json_result(workspace, [Reply(text="hi there")])
    assert (
        result["modelUsage"]
        == result["model_usage"]
        == {
            "fake-model": {
                "input_tokens": 12,
                "output_tokens": 7,
                "cache_read_input_tokens": 0,
                "calls": 1,
            }
        }
    )
    assert result["total_cost_usd"] == round((12 * 0.4 + 7 * 1.6) / 1e6, 6)
    assert isinstance(result["duration_api_ms"], int) and result["error_kind"] is None


def test_the_cost_is_said_in_every_view_and_unpriced_is_never_zero(workspace: Path) -> None:
    """The summary line, each worker's line, `gaffer stats`, `gaffer logs` and the
    timeline page all say what the run cost, from the same prices."""
    home = workspace.parent / "home" / ".config" / "gaffer"
    home.mkdir(parents=True)
    (home / "config.toml").write_text(
        '[model_prices."fake-model"]\ninput = 400\noutput = 1600\ncached_input = 100\n'
    )
    delegate = json.dumps({"profile": "explorer", "task": "look"})
    done, _ = gaffer_replying(
        workspace, "run", "--no-verify", "survey it",
        replies=[Reply(tool_calls=[("delegate", delegate)]), Reply(text="Done.")],
        routes={"look": [Reply(tool_calls=[("list_dir", "{}")]), Reply(text="Looked.")]},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    per_call = (12 * 400 + 7 * 1600) / 1e6  # the fake endpoint's usage for every call
    run, worker = dollars(4 * per_call), dollars(2 * per_call)
    assert f"tok · {worker} · " in done.stderr, "the worker's line"
    assert f" tokens · {run} · " in done.stderr.strip().splitlines()[-1], "the summary line"
    assert run in gaffer(workspace, "stats", "last").stdout
    assert run in gaffer(workspace, "logs", "last").stdout.strip().splitlines()[-1]
    page = gaffer(workspace, "view", "last")
    assert page.returncode == 0, page.stderr
    assert f"agents · {run}</h1>" in Path(page.stdout.strip()).read_text()
    (home / "config.toml").write_text("")
    plain, _ = gaffer_replying(workspace, "run", "--no-verify", "hi", replies=[Reply(text="hi")])
    assert " · unpriced · " in plain.stderr.strip().splitlines()[-1], "never $0 for a guess"


def test_gaffer_s_own_table_prices_the_common_models_and_a_dated_name() -> None:
    prices = prices_with()
    assert price_of("gpt-4.1-mini", prices) == Price(input=0.4, output=1.6, cached_input=0.1)
    assert price_of("gpt-4.1-mini-2025-04-14", prices) == prices["gpt-4.1-mini"]
    assert price_of("gpt-4o-audio-preview", prices) is None, "not a dated gpt-4o"
    assert price_of("qwen2.5-coder-1.5b-instruct", prices) == Price(
        input=0, output=0, cached_input=0
    ), "the bundled model runs on your machine"
    assert dollars(None) == "unpriced" and dollars(0.0) == "$0.00"


def test_a_dated_model_is_priced_as_the_model_it_is_a_version_of() -> None:
    prices = {"gpt-4.1": Price(input=2, output=8), "gpt-4.1-mini": Price(input=0.4, output=1.6)}
    assert price_of("gpt-4.1-mini-2025-04-14", prices) == prices["gpt-4.1-mini"]
    assert price_of("gpt-4.1-2025-04-14", prices) == prices["gpt-4.1"]
    assert price_of("gpt-4.10", prices) is None and price_of("o3", prices) is None
    assert (
        Price(input=1, output=2, cached_input=0.5).of(1000, 400, 100)
        == (600 * 1 + 400 * 0.5 + 100 * 2) / 1e6
    )


def test_output_format_stream_json_is_the_run_s_events_in_order(workspace: Path) -> None:
    done, _ = gaffer_replying(
        workspace,
        "run",
        "--no-verify",
        "--output-format",
        "stream-json",
        "hello",
        replies=[Reply(tool_calls=[("list_dir", "{}")]), Reply(text="hi there")],
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    events = [line["event"] for line in lines]
    assert events[0] == "session_start" and events[-2:] == ["session_end", "result"]
    assert events.index("llm_call") < events.index("tool_call") < events.index("agent_end")
    calls = [line for line in lines if line["event"] == "tool_call"]
    assert calls and all("content" not in call for call in calls), "no whole file contents"
    assert [line["content"] for line in lines if line["event"] == "user_message"] == ["hello"]
    assert lines[-1]["answer"] == "hi there"
    assert all(line["type"] == line["event"] for line in lines), "the discriminator others use"
    deltas = [line["text"] for line in lines if line["type"] == "text_delta"]
    assert "".join(deltas) == "hi there", "the model's text as it arrives"


def test_stream_json_says_each_tool_as_it_starts_and_a_file_s_text_by_its_digest(
    workspace: Path,
) -> None:
    add_host_coder(workspace)
    write = json.dumps({"path": "a.txt", "content": "alpha\n"})
    done, _ = gaffer_replying(
        workspace, "run", "--no-verify", "--profile", "hostcoder", "--output-format",
        "stream-json", "write a.txt", replies=[Reply(tool_calls=[("write_file", write)]),
        Reply(text="Wrote it.")],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    [start] = [line for line in lines if line["type"] == "tool_start"]
    [end] = [line for line in lines if line["type"] == "tool_call"]
    assert lines.index(start) < lines.index(end) and start["tool_call_id"] == end["tool_call_id"]
    digest = {"chars": 6, "sha256": hashlib.sha256(b"alpha\n").hexdigest()}
    assert start["args"] == end["args"] == {"path": "a.txt", "content": digest}


def test_every_run_ends_with_one_summary_line(workspace: Path) -> None:
    done, _ = gaffer_replying(workspace, "run", "--no-verify", "hello", replies=[Reply(text="hi")])
    assert done.stdout == "hi\n"
    summary = done.stderr.strip().splitlines()[-1]
    assert summary.startswith("gaffer: completed · 1 step ·") and " · log: " in summary
    quiet, _ = gaffer_replying(
        workspace, "run", "--quiet", "--no-verify", "hello", replies=[Reply(text="hi")]
    )
    assert quiet.stderr == ""


def test_gaffer_tools_lists_the_harness_tools_too(workspace: Path) -> None:
    done = gaffer(workspace, "tools")
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()[1:] if line.strip()}
    assert "harness" in rows["delegate"] and "supervisor" in rows["delegate"]
    assert "harness" in rows["use_skill"]


def test_stats_piped_cuts_nothing_and_busy_time_fits_the_run(workspace: Path) -> None:
    batch = Reply(
        tool_calls=[
            ("delegate", json.dumps({"profile": "explorer", "task": "look a"})),
            ("delegate", json.dumps({"profile": "explorer", "task": "look b"})),
        ]
    )
    slow = Reply(text="seen", delay=1.0)
    done, _ = gaffer_replying(
        workspace, "run", "--no-verify", "survey", replies=[batch, slow, slow, Reply(text="ok")]
    )
    assert done.returncode == 0, done.stderr
    shown = gaffer(workspace, "stats", "last")
    assert "…" not in shown.stdout and "supervisor" in shown.stdout
    rows = [line.split("│") for line in shown.stdout.splitlines() if line.startswith("│")]
    wall = float(next(r for r in rows if "completed" in r[1])[5])
    busy = [float(r[-3]) for r in rows if r[1].strip() == "supervisor"]
    assert busy and busy[0] <= wall + 0.05, "two workers at once are not twice the time"


def test_run_from_a_subfolder_of_a_repository_works_on_the_whole_project(
    tmp_path: Path,
) -> None:
    import subprocess

    root = tmp_path / "project"
    sub = root / "pkg" / "core"
    sub.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "AGENTS.md").write_text("Root rule: use tabs.\n")
    (root / "pkg" / "AGENTS.md").write_text("Pkg rule: no globals.\n")
    (sub / "AGENTS.md").write_text("Core rule: pure functions.\n")
    home_config = sub.parent / "home" / ".config" / "gaffer"  # where gaffer() points XDG
    home_config.mkdir(parents=True)
    (home_config / "AGENTS.md").write_text("User rule: answer in English.\n")
    done, server = gaffer_replying(
        sub, "run", "--no-verify", "hello", replies=[Reply(text="hi")], env={"GAFFER_LOG_DIR": ""}
    )
    assert done.returncode == 0, done.stderr
    logs = state.workspace_dir(root, state.LOGS)
    assert list(logs.glob("*.jsonl")), "the run's log is the top's"
    system = server.requests[0]["messages"][0]["content"]
    order = [system.index(rule) for rule in ("User rule", "Root rule", "Pkg rule", "Core rule")]
    assert order == sorted(order), "the user's first, then from the top down, nearest last"
    assert "The user started gaffer in pkg/core/" in system
    listed = gaffer(sub, "logs", env={"GAFFER_LOG_DIR": ""})
    assert "hello" in listed.stdout, "gaffer logs from the subfolder finds the run"


def test_on_a_terminal_the_answer_shows_once_and_the_view_says_what_happened(
    workspace: Path,
) -> None:
    """stdout and stderr on one pseudo-terminal, as a person runs gaffer: the streamed
    answer is not printed again; an edit shows its lines; a send-back is shown."""
    import os
    import pty
    import subprocess
    import sys

    from tests.helpers import add_host_coder, cli_env

    add_host_coder(workspace)
    (workspace / "calc.py").write_text("x = 1\n")
    replies = [
        Reply(tool_calls=[("read_file", json.dumps({"path": "calc.py"}))]),
        Reply(
            tool_calls=[
                (
                    "edit_file",
                    json.dumps({"path": "calc.py", "old_text": "x = 1", "new_text": "x = 2"}),
                )
            ]
        ),
        Reply(text="Changed x."),
        Reply(text="Still changed x."),
        Reply(text="The one and only answer."),
    ]
    with FakeOpenAI(replies) as server:
        main, child = pty.openpty()
        env = cli_env(workspace, server, {"TERM": "dumb", "COLUMNS": "200"})
        proc = subprocess.Popen(
            [sys.executable, "-m", "supervisor", "run", "--profile", "hostcoder", "fix x"],
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=child,
            stderr=child,
        )
        os.close(child)
        seen = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        proc.wait(30)
        os.close(main)
    text = seen.decode("utf-8", "replace")
    assert proc.returncode == 0, text
    assert text.count("The one and only answer.") == 1, text
    assert text.count("Verification: unverified") == 1, "what the gate added, once"
    assert "- x = 1" in text and "+ x = 2" in text
    assert "gaffer sent back to work" in text
    assert "thinking…" in text, "shown while the first call is in flight, then erased"


def test_a_wrong_path_is_said_with_a_hint(workspace: Path) -> None:
    from tests.fake_openai import error_reply

    with FakeOpenAI([error_reply(404, "Not Found")]) as server:
        done = gaffer(
            workspace, "run", "hello", server=server, env={"OPENAI_BASE_URL": server.base_url[:-3]}
        )
    assert done.returncode == 1 and f"did you mean {server.base_url[:-3]}/v1?" in done.stderr


def test_a_repository_someone_else_owns_around_the_folder_is_not_the_workspace(
    tmp_path: Path,
) -> None:
    """Another user's /tmp/.git must not make /tmp the project (nor its AGENTS.md ours)."""
    import os
    import subprocess

    from tests.conftest import must_run_here
    from workers.tools.git_paths import workspace_for

    if os.geteuid() != 0:
        must_run_here("making a folder another user owns needs root")
    theirs = tmp_path / "shared"
    mine = theirs / "mine"
    mine.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(theirs)], check=True)
    for root, dirs, files in os.walk(theirs):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.lchown(name, 1000, 1000)
    os.lchown(mine, 0, 0)
    assert workspace_for(mine) == mine.resolve()


def test_a_profile_with_its_own_endpoint_sends_its_requests_there_with_its_key(
    workspace: Path,
) -> None:
    """The supervisor on the run's endpoint, its explorer on the one the user's profile
    names, with the key from the variable it names: no request crosses over."""
    profiles = workspace.parent / "home" / ".config" / "gaffer" / "profiles"
    profiles.mkdir(parents=True)
    delegate = Reply(
        tool_calls=[("delegate", json.dumps({"profile": "explorer", "task": "look around"}))]
    )
    with FakeOpenAI([Reply(text="it is a folder")]) as worker_side:
        (profiles / "explorer.toml").write_text(
            f'model = "small"\nbase_url = "{worker_side.base_url}"\napi_key_env = "WORKER_KEY"\n'
        )
        env = {"WORKER_KEY": "sk-worker"}
        done, run_side = gaffer_replying(
            workspace,
            "run",
            "--no-verify",
            "survey",
            replies=[delegate, Reply(text="done")],
            env=env,
        )
    assert done.returncode == 0, done.stderr
    assert [h["authorization"] for h in worker_side.headers] == ["Bearer sk-worker"]
    assert [r["model"] for r in worker_side.requests] == ["small"]
    assert worker_side.requests[0]["messages"][1]["content"] == "look around"
    assert {h["authorization"] for h in run_side.headers} == {"Bearer sk-test"}
    assert all(r["model"] == "fake-model" for r in run_side.requests)
    assert len(run_side.requests) == 2, "the worker's calls never reach the run's endpoint"
    shown = gaffer(workspace, "stats", "last").stdout
    rows = {r.split("│")[1].strip(): r for r in shown.splitlines() if r.count("│") > 3}
    assert "small" in rows["w1"] and "fake-model" in rows["supervisor"], "stats name each model"


def test_a_profiles_unset_key_variable_fails_its_worker_with_one_line(workspace: Path) -> None:
    profiles = workspace.parent / "home" / ".config" / "gaffer" / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "explorer.toml").write_text(
        'base_url = "http://127.0.0.1:9/v1"\napi_key_env = "GAFFER_TEST_UNSET_KEY"\n'
    )
    delegate = Reply(tool_calls=[("delegate", json.dumps({"profile": "explorer", "task": "t"}))])
    done, server = gaffer_replying(
        workspace, "run", "--no-verify", "survey", replies=[delegate, Reply(text="done")]
    )
    assert "done" in done.stdout, done.stderr
    report = server.requests[1]["messages"][-1]["content"]
    assert "failed" in report
    assert "GAFFER_TEST_UNSET_KEY is not set: it holds the key for http://127.0.0.1:9/v1" in report


def test_max_cost_stops_the_run_at_its_limit_and_needs_every_model_priced(
    workspace: Path,
) -> None:
    home = workspace.parent / "home" / ".config" / "gaffer"
    home.mkdir(parents=True)
    (home / "config.toml").write_text(
        '[model_prices."fake-model"]\ninput = 400\noutput = 1600\ncached_input = 100\n'
    )
    (workspace / "a.txt").write_text("a\n")
    calls = [
        Reply(tool_calls=[("list_dir", "{}")]),
        Reply(tool_calls=[("read_file", '{"path": "a.txt"}')]),
        Reply(text="never asked"),
    ]
    done, server = gaffer_replying(
        workspace, "run", "--no-verify", "--output-format", "json", "--max-cost", "0.02", "look",
        replies=calls,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "limit" and result["reason"].startswith("cost limit: ")
    assert len(server.requests) == 2, "each call costs $0.016: the third is never made"
    (home / "config.toml").write_text("")
    with FakeOpenAI([Reply(text="never")]) as endpoint:
        unpriced = gaffer(workspace, "run", "--max-cost", "1", "look", server=endpoint)
    assert unpriced.returncode == 64
    assert "--max-cost needs a price for" in unpriced.stderr
