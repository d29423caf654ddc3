"""`gaffer undo` takes back only what the agent wrote, file by file: what the user changed
between its calls stays, a file both changed is refused in one line, one edited since is
undone by an exact merge or refused, nothing is done in a pipe without --yes, `gaffer redo`
takes the last undo back, the chat's `/undo` and `/redo` hold the same, and a git-ignored
file the run moved is moved back, never deleted (issue 41)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.fake_openai import FakeOpenAI, Reply
from tests.helpers import gaffer, host_coder_workspace, read_then_write

TEN = "".join(f"line {n}\n" for n in range(1, 11))


class Between(FakeOpenAI):
    """A scripted model that runs `hooks[n]` before its n-th answer: the user at work in
    another terminal between two of the agent's calls."""

    def __init__(self, replies: list[Reply], hooks: dict[int, Callable[[], None]]) -> None:
        super().__init__(replies)
        self.hooks = hooks
        self.asked = 0

    def _next(self, body: dict[str, Any]) -> Reply:
        if hook := self.hooks.get(self.asked):
            hook()
        self.asked += 1
        return super()._next(body)


workspace = host_coder_workspace


def run(ws: Path, replies: list[Reply], hooks: dict[int, Callable[[], None]]) -> None:
    with Between(replies, hooks) as server:
        done = gaffer(ws, "run", "--no-verify", "--profile", "hostcoder", "edit", server=server)
    assert done.returncode == 0, done.stderr


def first_line(ws: Path, name: str, text: str) -> None:
    lines = (ws / name).read_text().splitlines(keepends=True)
    (ws / name).write_text(text + "".join(lines[1:]))


def test_the_user_s_work_between_calls_stays_and_a_file_both_changed_is_refused(
    tmp_path: Path,
) -> None:
    ws = workspace(tmp_path, {"README.md": TEN, "a.txt": "a0\n", "shared.py": "s0\n"})

    def user() -> None:  # between the agent's first calls and its last
        with (ws / "README.md").open("a") as readme:
            readme.write("the user's line\n")
        (ws / "NOTES.md").write_text("the user's notes\n")
        (ws / "shared.py").write_text("s-user\n")

    readme = "agent's line 1\n" + TEN.split("\n", 1)[1]
    replies = [
        read_then_write("README.md", readme),
        read_then_write("a.txt", "a1\n"),
        read_then_write("shared.py", "s1\n"),
        read_then_write("shared.py", "s-agent\n"),
        Reply(text="Done."),
    ]
    run(ws, replies, {3: user})

    done = gaffer(ws, "undo", "--yes")
    assert done.returncode == 0, done.stderr
    said = done.stdout
    refusal = "shared.py: you changed it too during the run; not undone"
    assert [line for line in said.splitlines() if "shared.py" in line] == [
        f"{refusal} (gaffer diff shows the agent's part)",
        f"not undone: {refusal} (gaffer diff shows the agent's part)",
    ]
    assert (ws / "a.txt").read_text() == "a0\n"
    assert (ws / "README.md").read_text() == TEN + "the user's line\n"
    assert (ws / "NOTES.md").read_text() == "the user's notes\n"
    assert (ws / "shared.py").read_text() == "s-agent\n"
    # What was refused is still in effect, so the diff shows it so; the rest is undone.
    live, _, undone = gaffer(ws, "diff").stdout.partition("# UNDONE at ")
    assert "+s-agent" in live and "a.txt" not in live
    assert "# +a1" in undone and "s-agent" not in undone


def test_a_file_edited_since_is_undone_by_an_exact_merge_or_refused(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"f.txt": TEN, "g.txt": TEN})
    agent = "agent's line 1\n" + TEN.split("\n", 1)[1]
    run(
        ws, [read_then_write("f.txt", agent), read_then_write("g.txt", agent), Reply(text="ok")], {}
    )
    (ws / "f.txt").write_text(agent.replace("line 10", "the user's line 10"))
    first_line(ws, "g.txt", "the user's line 1\n")

    done = gaffer(ws, "undo", "--yes")
    assert done.returncode == 0, done.stderr
    assert "merge f.txt (modified), +1 -1; your later edits kept" in done.stdout
    assert "g.txt: changed since the run on the agent's own lines; not undone" in done.stdout
    assert (ws / "f.txt").read_text() == TEN.replace("line 10", "the user's line 10")
    assert (ws / "g.txt").read_text().startswith("the user's line 1\nline 2\n")


def test_undo_in_a_pipe_acts_only_with_yes_and_redo_takes_it_back(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"a.txt": "a0\n", "b.txt": "b0\n"})
    run(
        ws,
        [read_then_write("a.txt", "a1\n"), read_then_write("b.txt", "b1\n"), Reply(text="ok")],
        {},
    )

    asked = gaffer(ws, "undo")
    assert asked.returncode == 1
    assert "restore a.txt (modified), +1 -1" in asked.stdout
    assert "add --yes" in asked.stderr
    assert (ws / "a.txt").read_text() == "a1\n" and (ws / "b.txt").read_text() == "b1\n"

    done = gaffer(ws, "undo", "--yes")
    assert done.returncode == 0, done.stderr
    assert (ws / "a.txt").read_text() == "a0\n" and (ws / "b.txt").read_text() == "b0\n"
    assert "# UNDONE at" in gaffer(ws, "diff").stdout

    assert gaffer(ws, "redo").returncode == 1 and (ws / "a.txt").read_text() == "a0\n"
    (ws / "b.txt").write_text("b-user\n")  # changed since the undo: redo leaves it
    redone = gaffer(ws, "redo", "--yes")
    assert redone.returncode == 0, redone.stderr
    assert "redone: a.txt" in redone.stdout
    assert "not redone: b.txt: changed since the undo; not redone" in redone.stdout
    assert (ws / "a.txt").read_text() == "a1\n" and (ws / "b.txt").read_text() == "b-user\n"
    shown = gaffer(ws, "diff").stdout
    assert "UNDONE" not in shown and "+a1" in shown
    assert "nothing to redo" in gaffer(ws, "redo", "--yes").stderr


def test_the_chat_s_undo_and_redo_hold_the_same(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"f.txt": TEN, "g.txt": TEN, "h.txt": "h0\n"})
    agent = "agent's line 1\n" + TEN.split("\n", 1)[1]

    def user() -> None:
        (ws / "f.txt").write_text(agent + "the user's line 11\n")
        first_line(ws, "g.txt", "the user's line 1\n")
        (ws / "NOTES.md").write_text("notes\n")

    replies = [
        read_then_write("f.txt", agent),
        read_then_write("g.txt", agent),
        read_then_write("h.txt", "h1\n"),
        Reply(text="Changed."),
        Reply(text="Both are back."),
    ]
    lines = ["change them", "/undo", "/redo", "what now?", "/exit"]
    with Between(replies, {3: user}) as server:
        done = gaffer(
            ws,
            "chat",
            "--no-verify",
            "--profile",
            "hostcoder",
            server=server,
            stdin="\n".join(lines) + "\n",
        )
    assert done.returncode == 0, done.stderr
    said = done.stderr
    assert "undone: h.txt (modified)" in said and "undone: f.txt (modified)" in said
    assert "g.txt: changed since the run on the agent's own lines; not undone" in said
    assert "redone: f.txt" in said and "redone: h.txt" in said
    assert (ws / "f.txt").read_text() == agent + "the user's line 11\n"
    assert (ws / "h.txt").read_text() == "h1\n" and (ws / "NOTES.md").exists()
    told = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert "took back your changes with /undo" in told[-3], "the model is told of the undo"
    assert "put your changes back with /redo" in told[-2] and told[-1] == "what now?"
    log = "".join(p.read_text() for p in (ws.parent / "logs").glob("*.jsonl"))
    assert "[gaffer: the user took back your changes with /undo: undone: f.txt (modified); " in log
    assert "[gaffer: the user put your changes back with /redo: redone: " in log


def test_a_moved_ignored_env_is_moved_back_never_deleted(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {".gitignore": ".env\nhidden/\n", ".env": "SECRET=1\n"})
    (ws / "hidden").mkdir()
    inode = os.stat(ws / ".env").st_ino

    # The worker's own command (approved with --yes): a move inside one of its calls.
    move = Reply(tool_calls=[("run_shell", json.dumps({"command": "mv .env hidden/.env"}))])
    with Between([move, Reply(text="Moved.")], {}) as server:
        done = gaffer(
            ws, "run", "--yes", "--no-verify", "--profile", "hostcoder", "edit", server=server
        )
    assert done.returncode == 0, done.stderr
    assert not (ws / ".env").exists() and (ws / "hidden" / ".env").stat().st_ino == inode

    done = gaffer(ws, "undo", "--yes")
    assert done.returncode == 0, done.stderr
    assert "moved back: hidden/.env → .env" in done.stdout
    assert (ws / ".env").read_text() == "SECRET=1\n" and os.stat(ws / ".env").st_ino == inode
    assert not (ws / "hidden" / ".env").exists()


def test_at_a_terminal_undo_asks_and_no_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from supervisor import history
    from supervisor.cli import main

    ws = workspace(tmp_path, {"a.txt": "a0\n"})
    run(ws, [read_then_write("a.txt", "a1\n"), Reply(text="ok")], {})
    for name in [k for k in os.environ if k.startswith(("GAFFER_", "OPENAI_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.setenv("GAFFER_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.chdir(ws)
    monkeypatch.setattr(history, "stdin_is_terminal", lambda: True)

    said_no = CliRunner().invoke(main, ["undo"], input="n\n")
    assert said_no.exit_code == 1 and "Undo these 1 files? [y/N]" in said_no.output
    assert "restore a.txt (modified), +1 -1" in said_no.output
    assert (ws / "a.txt").read_text() == "a1\n"
    said_yes = CliRunner().invoke(main, ["undo"], input="y\n")
    assert said_yes.exit_code == 0, said_yes.output
    assert (ws / "a.txt").read_text() == "a0\n"


def test_gaffers_own_output_redirected_into_the_workspace_is_never_the_agents(
    tmp_path: Path,
) -> None:
    """`gaffer run ... 2> run.log` in the repository: run.log grows while every call runs
    (the worker's lines print during the supervisor's delegation), and is the user's; the
    change set and undo leave it alone."""
    from tests.helpers import cli_env

    ws = workspace(tmp_path, {"a.txt": "a0\n", "run.log": "earlier\n"})
    task = json.dumps({"profile": "hostcoder", "task": "edit a.txt"})
    top = [Reply(tool_calls=[("delegate", task)]), Reply(text="done")]
    worker = [read_then_write("a.txt", "a1\n"), Reply(text="ok")]
    with FakeOpenAI(top, {"edit a.txt": worker}) as server, open(ws / "run.log", "a") as log:
        done = subprocess.run(
            [sys.executable, "-m", "supervisor", "run", "--no-verify", "edit"],
            cwd=ws,
            env=cli_env(ws, server, None),
            stdout=subprocess.DEVNULL,
            stderr=log,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
    grown = (ws / "run.log").read_text()
    assert done.returncode == 0, grown
    assert "w1" in grown and (ws / "a.txt").read_text() == "a1\n"
    assert "run.log" not in gaffer(ws, "diff").stdout
    undone = gaffer(ws, "undo", "--yes")
    assert undone.returncode == 0, undone.stderr
    assert (ws / "a.txt").read_text() == "a0\n" and (ws / "run.log").read_text() == grown
