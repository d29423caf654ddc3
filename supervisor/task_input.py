"""The task of `gaffer run`: from the argument, from stdin (`-`), or the argument with
piped stdin added as context, as `claude -p` and `codex exec` take them."""

from __future__ import annotations

import os
import select
import stat
import sys

from supervisor.exits import EXIT_USAGE, fail

# How long a pipe may stay silent before gaffer takes it to carry nothing.
STDIN_WAIT_S = 0.5
MAX_STDIN_CHARS = 200_000


def task_from(argument: str) -> str:
    """The task to run, or a usage error in one line."""
    piped = _piped_stdin()
    if argument == "-":
        if not piped or not piped.strip():
            fail("the task is `-` but stdin is empty; pipe the task in, or give it", EXIT_USAGE)
        return piped.strip()
    if not argument.strip():
        fail(
            'the task is empty; say what to do, e.g. gaffer run "fix the failing test"', EXIT_USAGE
        )
    if piped and piped.strip():
        return f"{argument.strip()}\n\n<stdin>\n{piped.rstrip()}\n</stdin>"
    return argument


def _piped_stdin() -> str | None:
    """What a pipe or a file on stdin holds; None for a terminal, /dev/null, or a pipe
    that says nothing (a parent that never closes it must not hang gaffer)."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError):
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
        return None
    if stat.S_ISFIFO(mode) and not select.select([sys.stdin], [], [], STDIN_WAIT_S)[0]:
        return None
    text = sys.stdin.read(MAX_STDIN_CHARS + 1)
    if len(text) > MAX_STDIN_CHARS:
        fail(f"stdin holds more than {MAX_STDIN_CHARS:,} characters; pass a file's path instead")
    return text
