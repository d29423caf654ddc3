"""The user's hooks, run by `gaffer` as a user runs it against a scripted endpoint: each
moment fires once per occurrence with its JSON, for the supervisor and parallel workers;
a pre_tool hook blocks with exit 2; a hook that hangs, fails or floods is one line and
the run goes on; no secret reaches a hook; a workspace's hooks run only once trusted;
a formatter hook in a worker's container changes the worker's change set, and undo
takes it back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fake_openai import Reply
from tests.helpers import (
    add_host_coder,
    gaffer,
    gaffer_replying,
    logged,
    trust_workspace,
    user_config,
)

LIST = [("list_dir", json.dumps({"path": "."}))]


def recording(moments: list[str], into: Path) -> str:
    """Hooks that keep what they were given on stdin, a file each in the folder `into`
    (parallel workers' hooks run at once)."""
    into.mkdir(exist_ok=True)
    return "".join(f'[[hooks.{m}]]\ncommand = "cat > $(mktemp -p {into})"\n' for m in moments)


def recorded(into: Path) -> list[dict[str, Any]]:
    return sorted((json.loads(p.read_text()) for p in into.iterdir()), key=lambda e: str(e))


def test_each_moment_fires_once_with_its_json_for_the_supervisor_and_parallel_workers(
    workspace: Path,
) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    seen = workspace.parent / "seen"
    moments = ["user_prompt", "agent_start", "agent_end", "session_end", "pre_tool", "post_tool"]
    user_config(workspace, recording(moments, seen))
    fan_out = json.dumps({"profile": "explorer", "tasks": ["list one", "list two"]})
    done, _ = gaffer_replying(
        workspace,
        "run",
        "--no-verify",
        "survey the folder",
        replies=[Reply(tool_calls=[("delegate", fan_out)]), Reply(text="Two lists.")],
        routes={
            "list one": [Reply(tool_calls=LIST), Reply(text="one: a.txt")],
            "list two": [Reply(tool_calls=LIST), Reply(text="two: a.txt")],
        },
    )
    assert done.returncode == 0, done.stderr
    fired = recorded(seen)
    by = {m: [f for f in fired if f["event"] == m] for m in moments}
    assert len(by["user_prompt"]) == 1 and by["user_prompt"][0]["prompt"].startswith("survey")
    assert sorted(f["agent_id"] for f in by["agent_start"]) == ["supervisor", "w1", "w2"]
    assert sorted(f["agent_id"] for f in by["agent_end"]) == ["supervisor", "w1", "w2"]
    assert {f["parent_id"] for f in by["agent_end"] if f["agent_id"] != "supervisor"} == {
        "supervisor"
    }
    assert all(f["status"] == "completed" for f in by["agent_end"])
    assert len(by["session_end"]) == 1 and by["session_end"][0]["exit_code"] == 0
    calls = sorted((f["agent_id"], f["tool"]) for f in by["pre_tool"])
    assert calls == [("supervisor", "delegate"), ("w1", "list_dir"), ("w2", "list_dir")]
    assert sorted((f["agent_id"], f["tool"]) for f in by["post_tool"]) == calls
    post = next(f for f in by["post_tool"] if f["tool"] == "list_dir")
    assert post["arguments"] == {"path": "."} and "a.txt" in post["result"]["output"]
    assert post["profile"] == "explorer" and post["cwd"] == str(workspace)
    assert all(f["session_id"] == fired[0]["session_id"] and f["log_path"] for f in fired)
    assert "sk-test" not in json.dumps(fired), "no secret reaches a hook"
    assert len(logged(workspace, "hook")) == len(fired)


def test_a_blocking_pre_tool_hook_stops_the_call_with_its_reason(workspace: Path) -> None:
    add_host_coder(workspace)
    user_config(
        workspace,
        '[[hooks.pre_tool]]\ntools = ["write_file", "edit_file"]\n'
        'command = "grep -q \'\\"path\\": \\"migrations/\' && { echo \'migrations are frozen\' >&2; exit 2; }; exit 0"\n',
    )
    write = json.dumps({"path": "migrations/0002.sql", "content": "drop table users;\n"})
    done, server = gaffer_replying(
        workspace,
        "run",
        "--profile",
        "hostcoder",
        "--no-verify",
        "add a migration",
        replies=[Reply(tool_calls=[("write_file", write)]), Reply(text="blocked")],
    )
    assert done.returncode == 0, done.stderr
    assert not (workspace / "migrations").exists()
    said = server.requests[1]["messages"][-1]["content"]
    assert said == "not run: blocked by a pre_tool hook (migrations are frozen)"


def test_a_hook_that_hangs_fails_floods_or_cannot_start_is_one_line_and_the_run_goes_on(
    workspace: Path,
) -> None:
    user_config(
        workspace,
        '[[hooks.post_tool]]\ncommand = "sleep 60"\ntimeout = 1\n'
        '[[hooks.post_tool]]\ncommand = "echo broken >&2; exit 7"\n'
        '[[hooks.post_tool]]\ncommand = "yes flood"\n'
        '[[hooks.post_tool]]\ncommand = "no-such-program-here"\n',
    )
    done, _ = gaffer_replying(
        workspace,
        "run",
        "--no-verify",
        "list it",
        replies=[Reply(tool_calls=LIST), Reply(text="listed")],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "listed"
    ran = logged(workspace, "hook")
    assert [r["decision"] for r in ran] == ["failed"] * 4
    messages = [r["message"] for r in ran]
    assert messages[0] == "did not end within 1 s; stopped"
    assert messages[1] == "exited 7: broken"
    assert messages[2].startswith("flooded its output")
    assert messages[3].startswith("exited 127")
    assert all(r["elapsed_s"] < 20 for r in ran)
    assert "post_tool hook" in done.stderr and "the run goes on" in done.stderr


def test_a_hook_gets_no_secret_unless_it_names_one(workspace: Path) -> None:
    seen = workspace.parent / "env.txt"
    user_config(
        workspace,
        f'[[hooks.session_end]]\ncommand = "env > {seen}"\nenv = ["TEAM_WEBHOOK"]\n',
    )
    done, _ = gaffer_replying(
        workspace,
        "run",
        "--no-verify",
        "hi",
        replies=[Reply(text="hello")],
        env={"TEAM_WEBHOOK": "https://hooks.example/abc", "AWS_SECRET_ACCESS_KEY": "aws-secret"},
    )
    assert done.returncode == 0, done.stderr
    env = seen.read_text()
    assert "TEAM_WEBHOOK=https://hooks.example/abc" in env
    assert "sk-test" not in env and "OPENAI_API_KEY" not in env and "aws-secret" not in env
    assert f"PWD={workspace}" not in env, "it runs from a folder outside the workspace"


def test_a_workspace_s_hook_runs_only_once_trusted(workspace: Path) -> None:
    planted = workspace.parent / "planted"
    (workspace / ".gaffer").mkdir()
    (workspace / ".gaffer" / "config.toml").write_text(
        f'[[hooks.session_end]]\ncommand = "touch {planted}"\n'
    )
    done, _ = gaffer_replying(workspace, "run", "--no-verify", "hi", replies=[Reply(text="hello")])
    assert done.returncode == 0, done.stderr
    assert not planted.exists()
    assert "skipped config .gaffer/config.toml (not trusted" in done.stderr
    review = gaffer(workspace, "trust")
    assert f"session_end hook: touch {planted}" in review.stdout
    assert "hook   session_end" not in gaffer(workspace, "rules").stdout, "not before trust"
    trust_workspace(workspace)
    listed = gaffer(workspace, "rules").stdout
    assert f"hook   session_end: touch {planted}  (.gaffer/config.toml)" in listed
    done, _ = gaffer_replying(workspace, "run", "--no-verify", "hi", replies=[Reply(text="hello")])
    assert done.returncode == 0, done.stderr
    assert planted.exists()


def test_a_user_prompt_hook_adds_context_or_blocks_the_message(workspace: Path) -> None:
    user_config(workspace, "[[hooks.user_prompt]]\ncommand = \"echo 'Ticket: GAF-12'\"\n")
    done, server = gaffer_replying(
        workspace, "run", "--no-verify", "fix it", replies=[Reply(text="ok")]
    )
    assert done.returncode == 0, done.stderr
    assert "fix it\n\nTicket: GAF-12" in json.dumps(server.requests[0]["messages"]).replace(
        "\\n", "\n"
    )
    user_config(
        workspace,
        "[[hooks.user_prompt]]\ncommand = \"grep -q password && { echo 'no secrets in prompts' >&2; exit 2; }; exit 0\"\n",
    )
    done, server = gaffer_replying(
        workspace, "run", "--no-verify", "my password is hunter2", replies=[Reply(text="ok")]
    )
    assert done.returncode == 1
    assert "a user_prompt hook blocked the message: no secrets in prompts" in done.stderr
    assert server.requests == [], "the message never reached the model"


def test_a_notification_hook_fires_when_gaffer_waits_for_the_user(workspace: Path) -> None:
    from tests.fake_openai import FakeOpenAI
    from tests.helpers import Terminal

    add_host_coder(workspace)
    seen = workspace.parent / "waiting"
    user_config(workspace, recording(["notification"], seen))
    with FakeOpenAI([shell_reply_touch(), Reply(text="done")]) as server:
        terminal = Terminal(
            workspace, server, "run", "--profile", "hostcoder", "--no-verify", "touch it"
        )
        terminal.wait_for("[y]es / [N]o")
        terminal.answer("n")
        code, _ = terminal.finish()
    assert code == 3  # answered, a call denied
    [fired] = recorded(seen)
    assert fired["event"] == "notification" and fired["agent_id"] == "supervisor"
    assert fired["message"] == "supervisor asks to run_shell: touch made.txt"


def shell_reply_touch() -> Reply:
    return Reply(tool_calls=[("run_shell", json.dumps({"command": "touch made.txt"}))])


def test_a_hook_s_background_child_neither_holds_the_run_nor_outlives_it(workspace: Path) -> None:
    left = workspace.parent / "left-running"
    user_config(
        workspace, f'[[hooks.post_tool]]\ncommand = "(sleep 30; touch {left}) & echo started"\n'
    )
    done, _ = gaffer_replying(
        workspace, "run", "--no-verify", "list", replies=[Reply(tool_calls=LIST), Reply(text="ok")]
    )
    assert done.returncode == 0, done.stderr
    [ran] = logged(workspace, "hook")
    assert ran["decision"] == "ok" and ran["elapsed_s"] < 2


def test_a_hook_in_a_sandbox_gets_long_texts_cut_to_fit_a_command_line() -> None:
    from workers.user_hooks.config import Hook
    from workers.user_hooks.runner import in_sandbox_script

    hook = Hook("post_tool", "cat", "config.toml", in_sandbox=True)
    script = in_sandbox_script(hook, {"arguments": {"content": "x" * 500_000}})
    assert len(script) < 20_000 and '"truncated": true' in script
