"""Step mode (`gaffer run --step`), driven through a pseudo-terminal as a user at the
keyboard would: run a call, skip one, edit one's arguments, stop the run; parallel
workers' calls asked about as one batch; and no terminal, no step mode."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fake_openai import FakeOpenAI, Reply
from tests.helpers import Terminal, add_host_coder, gaffer

PROMPT = "run? [r]/s/s N…/e N/q:"


def write(path: str, content: str) -> Reply:
    return Reply(tool_calls=[("write_file", json.dumps({"path": path, "content": content}))])


def test_run_skip_and_edit_each_call_at_the_terminal(workspace: Path) -> None:
    add_host_coder(workspace)
    replies = [write("a.txt", "one"), write("b.txt", "two"), write("c.txt", "three")]
    replies.append(Reply(text="All three handled."))
    with FakeOpenAI(replies) as server:
        term = Terminal(
            workspace, server, "run", "--step", "--no-verify", "--profile", "hostcoder", "three"
        )
        shown = term.wait_for(PROMPT)
        assert 'supervisor write_file {"path": "a.txt", "content": "one"}' in shown
        term.answer("r")
        assert "b.txt" in term.wait_for(PROMPT)
        term.answer("s")
        assert "c.txt" in term.wait_for(PROMPT)
        term.answer("e 1")
        term.wait_for("(JSON):")
        term.answer('{"path": "c.txt", "content": "edited"}')
        assert "(edited)" in term.wait_for(PROMPT)
        term.answer("")
        code, stdout = term.finish()
    assert code == 0 and "All three handled." in stdout
    assert (workspace / "a.txt").read_text() == "one"
    assert not (workspace / "b.txt").exists()
    assert (workspace / "c.txt").read_text() == "edited"
    told = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert "the user skipped this call" in told[1]
    assert told[2].startswith("[the user changed this call's arguments")


def test_stop_at_a_step_ends_the_run_and_runs_nothing(workspace: Path) -> None:
    add_host_coder(workspace)
    with FakeOpenAI([write("a.txt", "one"), Reply(text="never")]) as server:
        term = Terminal(workspace, server, "run", "--step", "--profile", "hostcoder", "one")
        term.wait_for(PROMPT)
        term.answer("q")
        code, stdout = term.finish()
    assert code == 130 and stdout == ""
    assert "stopped by the user at a step" in term.seen
    assert not (workspace / "a.txt").exists() and len(server.requests) == 1


def test_parallel_workers_pause_together_as_one_batch(workspace: Path) -> None:
    (workspace / "notes.md").write_text("notes\n")
    delegate = [
        ("delegate", json.dumps({"profile": "explorer", "task": f"look {n}"})) for n in (1, 2)
    ]
    look = [("list_dir", json.dumps({"path": "."}))]
    routes = {f"look {n}": [Reply(tool_calls=look), Reply(text=f"saw {n}")] for n in (1, 2)}
    with FakeOpenAI([Reply(tool_calls=delegate), Reply(text="Both looked.")], routes) as server:
        term = Terminal(workspace, server, "run", "--step=all", "--read-only", "look twice")
        assert "supervisor delegate" in term.wait_for(PROMPT)
        term.answer("r")
        batch = term.wait_for(PROMPT)
        assert "w1 list_dir" in batch and "w2 list_dir" in batch, "one batch for both"
        assert "want to run" in batch
        term.answer("r")
        code, stdout = term.finish()
    assert code == 0 and "Both looked." in stdout


def test_step_mode_needs_a_terminal(workspace: Path) -> None:
    done = gaffer(workspace, "run", "--step", "anything", stdin="")
    assert done.returncode == 64
    assert done.stderr.strip() == (
        "gaffer: --step asks at the terminal, and stdin is not one: run it in a terminal"
    )


def test_step_in_the_chat_asks_then_off_stops_asking(workspace: Path, tmp_path: Path) -> None:
    from tests.test_repl_and_resume import repl_for
    from workers.model.scripted import call, say

    (workspace / "a.txt").write_text("alpha\n")
    # One conversation: the scripted model follows it by its first message.
    scripts = {
        "read it": [
            call("read_file", path="a.txt"),
            say("read"),
            call("list_dir", path="."),
            say("ok"),
        ]
    }
    repl, out, session = repl_for(workspace, tmp_path, scripts)
    answers = iter(["s"])
    repl.handle("/step")
    session.team.plan.stepper.read = lambda _prompt: next(answers)  # type: ignore[union-attr]
    repl.handle("read it")
    tool = [m for m in session.messages if m["role"] == "tool"]
    assert "the user skipped this call" in str(tool[-1]["content"])
    assert "supervisor read_file" in out.getvalue()
    repl.handle("/step off")
    repl.handle("read again")  # no prompt: `answers` is used up, and nothing asks
    tool = [m for m in session.messages if m["role"] == "tool"]
    assert "a.txt" in str(tool[-1]["content"])
    session.close()


def test_a_fan_out_made_for_the_agent_is_asked_about_and_skipped_starts_no_worker(
    workspace: Path,
) -> None:
    """A question of several parts is handed out before the agent's first reply
    (workers/aids/task_parts.py); in step mode that call waits for the user too."""
    task = "Where is the lexer? What calls it?"
    with FakeOpenAI([Reply(text="Not looked into: the user skipped it.")]) as server:
        term = Terminal(workspace, server, "run", "--step", "--profile", "dispatcher", task)
        shown = term.wait_for(PROMPT)
        assert "delegate" in shown and "Where is the lexer?" in shown
        term.answer("s")
        code, _ = term.finish()
    assert "▶ explorer" not in term.seen, "no worker started"
    assert code == 0, term.seen
    assert len(server.requests) == 1, "the agent's own reply only: no worker asked the model"
    first = [m["content"] for m in server.requests[0]["messages"] if m["role"] == "user"]
    assert any("the user skipped this call" in m for m in first)
