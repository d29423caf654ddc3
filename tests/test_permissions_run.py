"""Permission rules and modes as a user runs them: `gaffer` against a scripted endpoint,
a real container for the coder. A deny holds in a worker's container and on the host;
`rules test` says what the run did; a workspace's rules wait for trust and its review
lists them; ask-edits asks at a terminal with the diff; plan offers no editing tool.
(The docs page's examples, a container hook among them: tests/test_rules_examples.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.docker_support import require_docker, user_workspace
from tests.fake_openai import FakeOpenAI, Reply
from tests.helpers import (
    Terminal,
    add_host_coder,
    gaffer,
    gaffer_replying,
    shell_reply,
    trust_workspace,
    user_config,
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return user_workspace(tmp_path / "ws")


def told(server: FakeOpenAI, request: int = 1) -> str:
    """What the agent was told of its last call, in the request after it."""
    return str(server.requests[request]["messages"][-1]["content"])


DENY = '[permissions]\ndeny = ["run_shell(rm -rf:*)", "run_shell(git push)"]\n'


def test_a_deny_rule_stops_a_command_in_a_worker_s_container(ws: Path) -> None:
    require_docker()
    config = user_config(ws, DENY)
    (ws / "keep.txt").write_text("kept\n")
    done, server = gaffer_replying(
        ws,
        "run",
        "--profile",
        "coder",
        "--no-verify",
        "clean up",
        replies=[shell_reply("touch made.txt && rm -rf keep.txt"), Reply(text="done")],
    )
    assert done.returncode == 3, done.stderr  # answered, a call denied
    assert (ws / "keep.txt").exists() and not (ws / "made.txt").exists(), "nothing of it ran"
    assert told(server) == f"not run: denied by rule deny run_shell(rm -rf:*) in {config}"
    tested = gaffer(ws, "rules", "test", "touch made.txt && rm -rf keep.txt")
    assert (
        f"in a container (coder, shell): refused: denied by rule deny run_shell(rm -rf:*) in {config}"
        in tested.stdout
    )


def test_a_deny_rule_stops_a_command_on_the_host_whatever_yes_says(workspace: Path) -> None:
    add_host_coder(workspace)
    config = user_config(workspace, DENY)
    done, server = gaffer_replying(
        workspace,
        "run",
        "--profile",
        "hostcoder",
        "--yes",
        "--no-verify",
        "publish",
        replies=[shell_reply("git -C . push origin main"), Reply(text="done")],
    )
    assert done.returncode == 3, done.stderr  # answered, a call denied
    assert told(server) == f"not run: denied by rule deny run_shell(git push) in {config}"
    tested = gaffer(workspace, "rules", "test", "--yes", "git -C . push origin main")
    assert "on this machine (dispatcher, explorer, hostcoder, supervisor): refused" in tested.stdout


def test_an_ask_in_a_pipe_is_a_deny_that_says_what_would_let_it_run(workspace: Path) -> None:
    add_host_coder(workspace)
    config = user_config(workspace, '[permissions]\nask = ["run_shell(touch)"]\n')
    done, server = gaffer_replying(
        workspace,
        "run",
        "--profile",
        "hostcoder",
        "--mode",
        "full-auto",
        "--no-verify",
        "make a file",
        replies=[shell_reply("touch made.txt"), Reply(text="done")],
    )
    assert done.returncode == 3, done.stderr  # answered, a call denied
    assert not (workspace / "made.txt").exists()
    assert told(server) == (
        f"not run: it asks first (rule ask run_shell(touch) in {config}) and there is no "
        "terminal to ask at; to let it run, narrow or remove that ask rule (an allow rule "
        "cannot: ask wins over allow)"
    )


def test_a_workspace_s_rules_wait_for_trust_and_never_free_a_host_command(ws: Path) -> None:
    """Untrusted, a workspace's rules are not applied; trusted, its allow rules hold in
    containers (here: in ask-edits, which asks about every command), never for a
    command on this machine, which only your own config or flags can let run unasked."""
    require_docker()
    (ws / ".gaffer").mkdir()
    (ws / ".gaffer" / "config.toml").write_text('[permissions]\nallow = ["run_shell(touch:*)"]\n')
    script = [shell_reply("touch made.txt"), Reply(text="done")]
    args = ("run", "--profile", "coder", "--mode", "ask-edits", "--no-verify", "make a file")
    done, server = gaffer_replying(ws, *args, replies=list(script))
    assert not (ws / "made.txt").exists(), "an untrusted workspace widens nothing"
    assert told(server).startswith("not run: it asks first")
    assert "not applied: skipped config .gaffer/config.toml" in gaffer(ws, "rules").stdout
    assert "allow rule run_shell(touch:*)" in gaffer(ws, "trust").stdout
    trust_workspace(ws)
    assert "allow  run_shell(touch:*)  (.gaffer/config.toml)" in gaffer(ws, "rules").stdout
    tested = gaffer(ws, "rules", "test", "touch made.txt").stdout
    assert "on this machine (dispatcher, explorer, supervisor): asks first" in tested
    assert "in a container (coder, shell): runs: allowed by rule" in tested
    done, server = gaffer_replying(ws, *args, replies=list(script))
    assert done.returncode == 0, done.stderr
    assert (ws / "made.txt").exists()


def test_ask_edits_asks_at_the_terminal_with_the_diff(workspace: Path) -> None:
    add_host_coder(workspace)
    (workspace / "app.py").write_text("x = 1\n")
    read = ("read_file", json.dumps({"path": "app.py"}))
    edit = json.dumps({"path": "app.py", "old_text": "x = 1", "new_text": "x = 2"})
    again = json.dumps({"path": "app.py", "old_text": "x = 1", "new_text": "x = 3"})
    replies = [
        Reply(tool_calls=[read, ("edit_file", edit)]),
        Reply(tool_calls=[("edit_file", again)]),
        Reply(text="done"),
    ]
    with FakeOpenAI(replies) as server:
        terminal = Terminal(
            workspace,
            server,
            "run",
            "--profile",
            "hostcoder",
            "--mode",
            "ask-edits",
            "--no-verify",
            "bump x",
        )
        shown = terminal.wait_for("[y]es / [N]o")
        assert "edit this file?" in shown and "│ -x = 1" in shown and "│ +x = 2" in shown
        assert "--mode ask-edits asks before every edit" in shown
        terminal.answer("n")
        terminal.wait_for("[y]es / [N]o")
        assert (workspace / "app.py").read_text() == "x = 1\n", "the no held"
        terminal.answer("y")
        code, _ = terminal.finish()
    assert code == 3  # answered, a call denied
    assert (workspace / "app.py").read_text() == "x = 3\n"
    assert told(server, 1) == "not run: the user said no (--mode ask-edits asks before every edit)"


def test_plan_mode_offers_only_read_only_tools_and_asks_for_a_plan(workspace: Path) -> None:
    add_host_coder(workspace)
    done, server = gaffer_replying(
        workspace,
        "run",
        "--profile",
        "hostcoder",
        "--mode",
        "plan",
        "rename x to y",
        replies=[Reply(text="1. Edit app.py.")],
    )
    assert done.returncode == 0, done.stderr
    offered = {tool["function"]["name"] for tool in server.requests[0]["tools"]}
    assert offered and not offered & {"write_file", "edit_file", "run_shell"}
    assert "Plan mode: nothing may be changed" in server.requests[0]["messages"][0]["content"]


def test_the_chat_switches_the_mode_between_turns(workspace: Path) -> None:
    add_host_coder(workspace)

    def write(name: str) -> Reply:
        return Reply(tool_calls=[("write_file", json.dumps({"path": name, "content": "x\n"}))])

    replies = [write("a.txt"), Reply(text="refused"), write("b.txt"), Reply(text="written")]
    with FakeOpenAI(replies) as server:
        done = gaffer(
            workspace,
            "chat",
            "--profile",
            "hostcoder",
            "--no-verify",
            server=server,
            stdin="/mode plan\nwrite a.txt\n/mode auto\nwrite b.txt\n",
        )
    assert done.returncode == 0, done.stderr
    shown = done.stdout + done.stderr
    assert "mode: plan (edits and commands are refused until you switch back)" in shown
    assert "mode: auto" in shown
    assert not (workspace / "a.txt").exists() and (workspace / "b.txt").exists()
    assert told(server).startswith("not run: plan mode: read-only tools only")


def test_full_auto_runs_a_host_command_without_asking(workspace: Path) -> None:
    add_host_coder(workspace)
    done, _ = gaffer_replying(
        workspace,
        "run",
        "--profile",
        "hostcoder",
        "--mode",
        "full-auto",
        "--no-verify",
        "make a file",
        replies=[shell_reply("touch made.txt"), Reply(text="done")],
    )
    assert done.returncode == 0, done.stderr
    assert (workspace / "made.txt").exists()


def test_a_file_the_rules_keep_back_is_never_attached_for_the_agent(workspace: Path) -> None:
    (workspace / "secrets").mkdir()
    (workspace / "secrets" / "key.json").write_text('{"key": "TOPSECRET"}\n')
    user_config(workspace, '[permissions]\ndeny = ["read_file(secrets/**)"]\n')
    done, server = gaffer_replying(
        workspace,
        "run",
        "--profile",
        "explorer",
        "what does secrets/key.json hold?",
        replies=[Reply(text="I may not read it.")] * 3,
    )
    assert done.returncode in (0, 3), done.stderr
    assert "TOPSECRET" not in json.dumps(server.requests)


def test_a_call_the_rules_hold_back_is_a_permission_denial_in_the_json(workspace: Path) -> None:
    add_host_coder(workspace)
    user_config(workspace, DENY)
    done, _ = gaffer_replying(
        workspace,
        "run",
        "--profile",
        "hostcoder",
        "--output-format",
        "json",
        "--no-verify",
        "publish",
        replies=[shell_reply("git push origin main"), Reply(text="not pushed")],
    )
    result = json.loads(done.stdout)
    assert (done.returncode, result["exit_code"], result["status"]) == (3, 3, "incomplete")
    [denial] = result["permission_denials"]
    assert denial["tool_name"] == "run_shell"
    assert denial["tool_input"] == {"command": "git push origin main"}
