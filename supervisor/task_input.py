"""The task of `gaffer run`: from the argument, from stdin (`-`), or the argument with
piped stdin added as context, as `claude -p` and `codex exec` take them."""

from __future__ import annotations

import os
import select
import stat
import sys

from supervisor.exits import EXIT_USAGE, fail
from supervisor.terminal import echo

# How long a pipe may stay silent before gaffer takes it to carry nothing.
STDIN_WAIT_S = 0.5
MAX_STDIN_BYTES = 200_000


def task_from(argument: str) -> str:
    """The task to run, or a usage error in one line."""
    if argument == "-":
        piped = _read_stdin(wait=None)
        if not piped or not piped.strip():
            fail("the task is `-` but stdin is empty; pipe the task in, or give it", EXIT_USAGE)
        return piped.strip()
    if not argument.strip():
        fail(
            'the task is empty; say what to do, e.g. gaffer run "fix the failing test"', EXIT_USAGE
        )
    piped = _read_stdin(wait=STDIN_WAIT_S)
    if piped and piped.strip():
        return f"{argument.strip()}\n\n<stdin>\n{piped.rstrip()}\n</stdin>"
    return argument


def _read_stdin(wait: float | None) -> str | None:
    """What a pipe or a file on stdin holds; None for a terminal or /dev/null. A pipe that
    says nothing for `wait` seconds is left alone, with one line saying so (a parent that
    never closes it must not hang gaffer); once it has begun, it is read to its end."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError):
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
        return None
    if stat.S_ISFIFO(mode) and wait is not None and not select.select([sys.stdin], [], [], wait)[0]:
        echo(f"gaffer: stdin said nothing for {wait:g} s; it is not part of the task", err=True)
        return None
    data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
    if len(data) > MAX_STDIN_BYTES:
        fail(f"stdin holds more than {MAX_STDIN_BYTES:,} bytes; pass a file's path instead")
    return data.decode("utf-8", "replace")
