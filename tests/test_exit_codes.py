"""Exit codes that tell the truth, through the real CLI against a scripted endpoint: 0
only when the run finished and nothing it started failed (README's exit-code table)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

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
    assert result["exit_code"] == 3 and result["status"] == "incomplete"
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


def test_an_answer_over_a_failing_test_run_exits_3_naming_it(tmp_path: Path) -> None:
    """Not "unverified": the change's own test run failed (in the coder's container), and
    the answer went out anyway."""
    from tests.docker_support import chown_tree, require_docker, user_workspace

    require_docker()
    workspace = user_workspace(tmp_path / "ws")
    (workspace / "calc.py").write_text("x = 1\n")
    (workspace / "test_calc.py").write_text(
        "from calc import x\n\ndef test_x():\n    assert x == 3\n"
    )
    chown_tree(workspace)
    edit = json.dumps({"path": "calc.py", "old_text": "x = 1", "new_text": "x = 2"})
    script = [
        Reply(tool_calls=[("read_file", '{"path": "calc.py"}')]),
        Reply(tool_calls=[("edit_file", edit)]),
        Reply(tool_calls=[("run_shell", json.dumps({"command": "python3 -m pytest -q"}))]),
        *[Reply(text="Changed x.")] * 3,  # sent back twice to fix it, then accepted
    ]
    with FakeOpenAI(script) as server:
        done = gaffer(
            workspace,
            "run",
            "--profile",
            "coder",
            "--output-format",
            "json",
            "set x",
            server=server,
        )
    assert done.returncode == 3, done.stderr
    assert "answered, but the check failed: `python3 -m pytest -q`" in done.stderr
    assert "test_x" in done.stderr, "its first failure named"
    result = json.loads(done.stdout)
    assert result["exit_code"] == 3 and result["is_error"] is True


def test_a_usage_error_asked_for_json_is_a_result_object_too(workspace: Path) -> None:
    done = gaffer(workspace, "run", "--output-format", "json", "--max-steps", "lots", "x")
    assert done.returncode == 64
    result = json.loads(done.stdout)
    assert result["type"] == "result" and result["is_error"] is True
    assert result["exit_code"] == 64 and result["status"] == "usage_error"
    assert "'lots' is not a valid integer" in result["error"]
    assert "gaffer: " in done.stderr and "'lots'" in done.stderr
    empty = gaffer(workspace, "run", "--output-format=stream-json", "   ")
    assert empty.returncode == 64 and json.loads(empty.stdout)["reason"].startswith(
        "the task is empty"
    )
    plain = gaffer(workspace, "run", "--max-steps", "lots", "x")
    assert plain.returncode == 64 and plain.stdout == "", "JSON only when asked for"


def test_dash_p_runs_a_task_as_other_agents_clis_do(workspace: Path) -> None:
    with FakeOpenAI([Reply(tool_calls=[("list_dir", "{}")]), Reply(text="hi")]) as server:
        done = gaffer(workspace, "-p", "say hi", "--output-format", "json", server=server)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "hi"


def test_continue_goes_on_from_the_last_run_that_got_going(workspace: Path) -> None:
    with FakeOpenAI([Reply(tool_calls=[("list_dir", "{}")]), Reply(text="first answer")]) as server:
        assert gaffer(workspace, "run", "the first task", server=server).returncode == 0
    closed = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-test"}
    broken = gaffer(workspace, "run", "a run whose endpoint is not there", env=closed)
    assert broken.returncode == 1 and len(list((workspace.parent / "logs").glob("*.jsonl"))) == 2
    with FakeOpenAI([Reply(text="second answer")]) as server:
        done = gaffer(workspace, "run", "-c", "and then?", server=server)
    assert done.returncode == 0, done.stderr
    contents = [m["content"] for m in server.requests[0]["messages"] if m["role"] == "user"]
    assert contents[0] == "the first task" and contents[-1] == "and then?"


def test_a_third_continue_still_has_the_first_exchange(workspace: Path) -> None:
    for task, answer in (("the first task", "one"), ("-c", "two"), ("-c", "three")):
        with FakeOpenAI([Reply(text=answer)]) as server:
            args = ["-c", f"after {answer}?"] if task == "-c" else [task]
            done = gaffer(workspace, "run", "--no-verify", *args, server=server)
        assert done.returncode == 0, done.stderr
    sent = [(m["role"], m["content"]) for m in server.requests[0]["messages"][1:]]
    assert sent == [
        ("user", "the first task"),
        ("assistant", "one"),
        ("user", "after two?"),
        ("assistant", "two"),
        ("user", "after three?"),
    ], "every run of the chain, oldest first"
    # planted logs that name each other: the chain ends where it comes round
    logs = sorted((workspace.parent / "logs").glob("*.jsonl"))
    first = logs[0].read_text().splitlines()
    start = json.loads(first[0])
    start["resumed_from"] = logs[-1].stem
    logs[0].write_text("\n".join([json.dumps(start), *first[1:]]) + "\n")
    with FakeOpenAI([Reply(text="four")]) as server:
        done = gaffer(workspace, "run", "--no-verify", "-c", "and?", server=server)
    assert done.returncode == 0, done.stderr


def test_a_plain_question_is_answered_in_one_model_call(workspace: Path) -> None:
    (workspace / "calc.py").write_text("x = 1\n")
    with FakeOpenAI([Reply(text="Hello! What shall we work on?")]) as server:
        done = gaffer(workspace, "run", "hello there", server=server)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello! What shall we work on?\n" and len(server.requests) == 1
    assert server.requests[0].get("tool_choice") != "required", "no look was forced"
    # A task about the code still looks first.
    with FakeOpenAI([Reply(tool_calls=[("list_dir", "{}")]), Reply(text="calc.py")]) as server:
        done = gaffer(workspace, "run", "where is x set?", server=server)
    assert done.returncode == 0, done.stderr
    assert len(server.requests) == 2, "a task about the code looks before it answers"


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_reply_cut_off_with_nothing_in_it_is_a_limit_not_an_empty_answer(
    workspace: Path, api: str
) -> None:
    """All the output tokens went to reasoning (Responses) or to nothing shown (Chat
    Completions, `finish_reason: length`): exit 2, saying so, never `completed`."""
    cut = Reply(cut_at_limit=True, completion_tokens=4096, reasoning_tokens=4096)
    with FakeOpenAI([Reply(tool_calls=[("list_dir", "{}")]), cut]) as server:
        done = gaffer(
            workspace, "run", "--api", api, "--output-format", "json", "where is x?", server=server
        )
    assert done.returncode == 2, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "limit" and result["is_error"] is True
    assert (
        "the reply was cut off at the output limit with nothing in it (4096 tokens"
        in (result["reason"])
    )


def test_a_model_call_that_says_nothing_for_long_gets_a_progress_line_through_a_pipe(
    workspace: Path,
) -> None:
    """An endpoint that keeps the connection open and sends only keep-alive comments: a
    script reading stderr is told every 15 s that gaffer is waiting, and on what."""
    hung = Reply(text="hello", keep_alive_for=17)
    with FakeOpenAI([hung]) as server:
        done = gaffer(workspace, "run", "hello there", server=server)
    assert done.returncode == 0, done.stderr
    assert "gaffer: waiting for the model: supervisor step 1, 15 s so far" in done.stderr


def test_an_endpoint_that_sends_nothing_ends_the_run_at_the_first_byte_deadline(
    workspace: Path,
) -> None:
    """Taken and never answered, not even with a header: the run ends with the reason
    at first_byte_timeout (here from the config), exit 1, not at request_timeout."""
    config = workspace / ".gaffer" / "config.toml"
    config.parent.mkdir(exist_ok=True)
    config.write_text("first_byte_timeout = 2\n")
    with FakeOpenAI([Reply(text="too late", delay=60)] * 3) as server:
        started = time.monotonic()
        done = gaffer(workspace, "run", "--trust-workspace", "hello there", server=server)
        took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert took < 20, f"ended near the 2 s deadline (took {took:.0f} s)"
    assert "took the request and sent nothing for 2 s (first_byte_timeout)" in done.stderr


def test_a_misspelt_profile_or_config_key_says_what_was_meant(workspace: Path) -> None:
    done = gaffer(workspace, "run", "--profile", "explorr", "look")
    assert done.returncode == 64
    assert done.stderr.strip() == "gaffer: no profile 'explorr'; did you mean 'explorer'?"
    config = workspace.parent / "home" / ".config" / "gaffer" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("max_step = 3\n")
    done = gaffer(workspace, "run", "look")
    assert done.returncode == 1
    assert done.stderr.strip().endswith("unknown key 'max_step'; did you mean 'max_steps'?")
    config.write_text("tool_prefil = 'x'\nzzz = 1\n")
    done = gaffer(workspace, "run", "look")
    assert "tool_prefill" in done.stderr, "close to what was written: said"
    config.write_text("zzz = 1\n")
    done = gaffer(workspace, "run", "look")
    assert "tool_prefill" not in done.stderr and "docs/configuration.md" in done.stderr


def test_a_reply_the_time_limit_cuts_is_the_partial_answer_on_stdout(workspace: Path) -> None:
    with FakeOpenAI([Reply(text="word " * 300, drip_s=0.05)]) as server:
        done = gaffer(workspace, "run", "--max-seconds", "3", "say a lot", server=server)
    assert done.returncode == 2, done.stderr
    assert done.stdout.startswith("word word ") and 0 < len(done.stdout) < 1500
    assert "stopped: time limit" in done.stderr
