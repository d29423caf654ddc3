"""`--api responses`: the Responses API through the real CLI against a local fake server
(streamed and not): tool calls matched by call id, reasoning items sent back verbatim,
parallel calls, a broken stream and a 429 retried, a resume that restores reasoning,
and a tree whose workers speak one API while the supervisor speaks the other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fake_openai import FakeOpenAI, Reply, error_reply
from tests.helpers import gaffer, trust_workspace

REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Read a.txt first."}],
    "encrypted_content": "gAAAAB" + "x9/+=" * 40,
}


def run(workspace: Path, *args: str, replies: list[Reply], **routes: Any) -> tuple[Any, FakeOpenAI]:
    with FakeOpenAI(replies, routes.get("routes")) as server:
        done = gaffer(workspace, "run", "--api", "responses", "--no-verify", *args, server=server)
    return done, server


def call(name: str, **args: Any) -> tuple[str, str]:
    return (name, json.dumps(args))


def log_lines(workspace: Path, event: str) -> list[dict[str, Any]]:
    logs = sorted((workspace.parent / "logs").glob("*.jsonl"))
    lines = [json.loads(line) for line in logs[-1].read_text().splitlines()]
    return [r for r in lines if r["event"] == event]


def items(request: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [i for i in request["input"] if i.get("type") == kind]


def test_a_tool_using_run_sends_reasoning_back_verbatim(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    replies = [
        Reply(
            reasoning=[REASONING], tool_calls=[call("read_file", path="a.txt")], reasoning_tokens=64
        ),
        Reply(text="a.txt says alpha.", reasoning_tokens=8),
    ]
    for stream in ([], ["--no-stream"]):
        done, server = run(workspace, *stream, "what is in a.txt?", replies=list(replies))
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "a.txt says alpha."
        assert all(path.endswith("/responses") for path in server.paths)
        first, second = server.requests
        assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
        assert {t["name"] for t in first["tools"]} >= {"read_file"} and "function" not in first[
            "tools"
        ][0]
        sent = items(second, "reasoning")
        assert json.dumps(sent) == json.dumps([REASONING]), "byte-identical"
        assert items(second, "function_call")[0]["id"] == "fc_0", "the server's own item"
        (fc,) = items(second, "function_call")
        (out,) = items(second, "function_call_output")
        assert fc["call_id"] == out["call_id"] == "call_0" and "alpha" in out["output"]
        assert second["input"].index(sent[0]) < second["input"].index(fc), "reasoning first"
        calls = log_lines(workspace, "llm_call")
        assert [c.get("reasoning_tokens") for c in calls] == [64, 8]
        assert calls[0]["reasoning"][0] == REASONING
        assert [i["type"] for i in calls[0]["reasoning"]] == ["reasoning", "function_call"]


def test_parallel_calls_are_answered_by_call_id(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "b.txt").write_text("beta\n")
    replies = [
        Reply(tool_calls=[call("read_file", path="a.txt"), call("read_file", path="b.txt")]),
        Reply(text="alpha and beta."),
    ]
    done, server = run(workspace, "both files?", replies=replies)
    assert done.returncode == 0, done.stderr
    outputs = {o["call_id"]: o["output"] for o in items(server.requests[1], "function_call_output")}
    assert "alpha" in outputs["call_0"] and "beta" in outputs["call_1"]


def test_a_broken_stream_and_a_429_are_retried(workspace: Path) -> None:
    replies = [
        Reply(text="a reply that breaks off", cut_after_chunks=2),
        error_reply(429, "slow down", **{"Retry-After": "1"}),
        Reply(text="whole at last."),
    ]
    done, server = run(workspace, "say something", replies=replies)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "whole at last." and len(server.requests) == 3
    retries = log_lines(workspace, "llm_retry")
    assert len(retries) == 2 and retries[1]["wait_s"] >= 1.0


def test_a_context_length_failure_has_its_own_kind(workspace: Path) -> None:
    failed = Reply(error={"code": "context_length_exceeded", "message": "too many tokens"})
    done, _ = run(workspace, "say something", replies=[failed])
    assert done.returncode == 1
    assert "no longer fits the model's context window" in done.stderr


def test_a_resume_sends_the_reasoning_items_back(workspace: Path) -> None:
    first = [
        Reply(reasoning=[REASONING], tool_calls=[call("list_dir", path=".")]),
        Reply(text="One."),
    ]
    done, _ = run(workspace, "look", replies=first)
    assert done.returncode == 0, done.stderr
    done, server = run(workspace, "--resume", "last", "and again", replies=[Reply(text="Two.")])
    assert done.returncode == 0, done.stderr
    assert items(server.requests[0], "reasoning") == [REASONING]


def test_workers_may_speak_another_api_than_the_supervisor(workspace: Path) -> None:
    folder = workspace / ".gaffer" / "profiles"
    folder.mkdir(parents=True)
    (folder / "reasoner.toml").write_text(
        'name = "reasoner"\ndescription = "Reads, on the Responses API."\n'
        'tools = ["read_file", "list_dir"]\napi = "responses"\n'
        'system_prompt = "You read code in {workspace}."\n'
    )
    trust_workspace(workspace)
    task = json.dumps({"profile": "reasoner", "task": "list the files"})
    replies = [Reply(tool_calls=[("delegate", task)]), Reply(text="Listed.")]
    routes = {
        "list the files": [Reply(tool_calls=[call("list_dir", path=".")]), Reply(text="a few")]
    }
    with FakeOpenAI(replies, routes) as server:
        done = gaffer(workspace, "run", "--no-verify", "--read-only", "survey", server=server)
    assert done.returncode == 0, done.stderr
    by_api = [
        (p.rsplit("/", 1)[-1], "input" in r)
        for p, r in zip(server.paths, server.requests, strict=True)
    ]
    assert by_api.count(("responses", True)) == 2, by_api
    assert by_api.count(("completions", False)) == 2, by_api


def test_stats_show_reasoning_tokens(workspace: Path) -> None:
    done, _ = run(workspace, "hi", replies=[Reply(text="Hello.", reasoning_tokens=33)])
    assert done.returncode == 0, done.stderr
    shown = gaffer(workspace, "stats", "last")
    assert "of which reasoning" in shown.stdout and "33" in shown.stdout


def test_the_server_keeps_responses_only_when_asked(workspace: Path) -> None:
    config = workspace.parent / "home" / ".config" / "gaffer" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("responses_store = true\n")
    done, server = run(workspace, "hi", replies=[Reply(text="Hello.")])
    assert done.returncode == 0, done.stderr
    assert server.requests[0]["store"] is True and "include" not in server.requests[0]
