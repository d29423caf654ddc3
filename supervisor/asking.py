"""Asking the user at the terminal before a call runs: which agent asks, what it would
run or change (an edit with its diff), and why it asks; yes, no, or always this same
thing for the rest of the session. Every line of it goes through the one sanitiser."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager

from rich.console import Console

from supervisor.terminal import one_line
from workers.permissions.gate import Ask, Asker
from workers.tools.base import Approver

PREVIEW_LINES = 80
QUESTION = "  [y]es / [N]o / [a]lways this in this session: "
YOU = "you"


def terminal_asker(
    console: Console,
    read: Callable[[str], str] = input,
    pause: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
) -> Asker:
    """Asks on `console` (stderr: stdout is the answer's), reading the reply with `read`;
    `pause` holds the view's other output while the user answers."""
    always: set[tuple[str, str, str]] = set()

    def ask(question: Ask) -> bool:
        if _key(question) in always:
            return True
        with pause():
            return _asked(question)

    def _asked(question: Ask) -> bool:
        lines = question.what.split("\n")
        # Every line of the command marked as the command's, and counted: blank lines
        # could otherwise push its real end out of view, or mimic gaffer's own text.
        shown = "\n".join(f"  │ {one_line(line)}" for line in lines)
        count = f" ({len(lines)} lines)" if len(lines) > 1 else ""
        console.print(
            f"{_question(question)}{count}\n{shown}{_preview(question.preview)}\n"
            f"  ({one_line(question.why)})",
            markup=False,
            highlight=False,
        )
        console.print(QUESTION, end="", markup=False, highlight=False)
        console.file.flush()
        try:
            answer = read("")
        except EOFError:
            return False
        answer = answer.strip().lower()
        if answer in ("a", "always"):
            always.add(_key(question))
        return answer in ("y", "yes", "a", "always")

    return ask


def _key(question: Ask) -> tuple[str, str, str]:
    """What "always" holds for: this command, or this very edit (its diff), whoever asks."""
    return question.tool, question.what, question.preview


def _question(question: Ask) -> str:
    who = "" if question.agent in (YOU, "supervisor") else f"{one_line(question.agent)} asks: "
    if question.tool == "run_shell":
        where = "in its container" if "in its container" in question.agent else "on this machine"
        return f"{who}run {where}?"
    if question.tool in ("write_file", "edit_file"):
        return f"{who}{question.tool.replace('_file', '')} this file?"
    return f"{who}call {one_line(question.tool)}?"


def _preview(diff: str) -> str:
    if not diff:
        return ""
    lines = diff.splitlines()
    cut = lines[:PREVIEW_LINES]
    more = ""
    if len(lines) > len(cut):  # the rest is not hidden: the whole diff is in a file
        fd, name = tempfile.mkstemp(prefix="gaffer-ask-", suffix=".diff")
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(diff)
        more = f"\n  │ … {len(lines) - len(cut)} more lines: the whole diff is in {name}"
    return "\n" + "\n".join(f"  │ {one_line(line)}" for line in cut) + more


def ask_user(console: Console, read: Callable[[str], str] = input) -> Approver:
    """The user's own host command (the chat's `!cmd`), asked about as an agent's are."""
    return approver_of(terminal_asker(console, read))


def approver_of(asker: Asker) -> Approver:
    return lambda command, reason: asker(Ask(YOU, "run_shell", command, reason))
