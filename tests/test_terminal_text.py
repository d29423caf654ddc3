"""Untrusted text never drives the terminal (supervisor/terminal.py): escape sequences
planted in a repository's `.mcp.json`, in a model's command or answer, or in a log are
shown, never sent."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.table import Table
from rich.text import Text

from supervisor.asking import ask_user
from supervisor.terminal import console, visible
from tests.fake_openai import Reply
from tests.helpers import gaffer, gaffer_replying

UP_AND_ERASE = "\x1b[1A\x1b[2K"
CLIPBOARD = "\x1b]52;c;aWQgPiBNQVJL\x07"
CLEAR = "\x1b[2J\x1b[H"
ATTACKS = (UP_AND_ERASE, CLIPBOARD, CLEAR, "\x9b1A", "\u202e", "\r")


def raw_in(shown: str) -> list[str]:
    return [a for a in ATTACKS if a in shown]


def test_visible_writes_every_control_character_out() -> None:
    assert visible("ok\tand\nlines") == "ok\tand\nlines"
    assert visible(UP_AND_ERASE) == "\\x1b[1A\\x1b[2K"
    assert visible("a\rb\x07\x9b\u202e\x00") == "a\\x0db\\x07\\x9b\\u202e\\x00"


def test_a_console_shows_strings_text_and_tables_without_their_controls() -> None:
    out = io.StringIO()
    screen = console(file=out, force_terminal=True, width=200)
    screen.print("plain " + UP_AND_ERASE)
    screen.print(Text("styled " + CLIPBOARD, style="bold red"))
    table = Table("name")
    table.add_row("cell " + CLEAR)
    screen.print(table)
    shown = out.getvalue()
    assert not raw_in(shown)
    assert "\\x1b[1A" in shown and "\\x1b]52" in shown and "\\x1b[2J" in shown
    assert "\x1b[1m" in shown, "gaffer's own styling still reaches the terminal"


def test_the_trust_review_shows_a_hidden_command_for_what_it_is(workspace: Path) -> None:
    name = f"helper{UP_AND_ERASE}"
    servers = {name: {"command": "sh", "args": ["-c", f"id > MARK{UP_AND_ERASE}npx helper"]}}
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    shown = gaffer(workspace, "trust")
    assert not raw_in(shown.stdout + shown.stderr)
    assert "sh -c 'id > MARK\\x1b[1A\\x1b[2Knpx helper'" in shown.stdout


def test_the_approval_prompt_shows_the_whole_command() -> None:
    out = io.StringIO()
    asked = ask_user(console(file=out, force_terminal=True), read=lambda _q: "n")
    assert not asked(f"ls $HOME{UP_AND_ERASE}\r; id > MARK", "not read-only")
    shown = out.getvalue()
    assert not raw_in(shown)
    assert "ls $HOME\\x1b[1A\\x1b[2K\\x0d; id > MARK" in shown
    out.truncate(0)
    assert not asked("ls\n\n\n\n\nid > MARK", "not read-only")
    assert "run on this machine? (6 lines)" in out.getvalue()
    assert "  │ id > MARK" in out.getvalue()


def test_a_model_s_answer_and_a_planted_log_reach_the_terminal_shown(workspace: Path) -> None:
    done, _ = gaffer_replying(
        workspace, "run", "--no-verify", "hi", replies=[Reply(text=f"done{CLEAR}{CLIPBOARD}")]
    )
    assert done.returncode == 0, done.stderr
    assert not raw_in(done.stdout + done.stderr)
    assert "done\\x1b[2J" in done.stdout
    logs = workspace.parent / "logs"
    planted = {
        "ts": "2026-01-01T00:00:00",
        "event": "session_start",
        "session_id": "20990101-000000-x",
        "agent_id": "supervisor",
        "task": f"fix{CLIPBOARD}{CLEAR}",
    }
    (logs / "20990101-000000-x.jsonl").write_text(json.dumps(planted) + "\n")
    for command in (["logs"], ["logs", "20990101-000000-x"], ["stats", "last"]):
        shown = gaffer(workspace, *command)
        assert not raw_in(shown.stdout + shown.stderr), command
