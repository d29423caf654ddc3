"""Asking a stalled small model for the change, with the files in front of it.

A 1.5B coder that has the files and a failing test often goes on reading and testing,
or says in prose what it would change, and never writes it. The same model given the
task and the files in one message, and asked for the file, writes the fix: on the bench
it solves `median_bug`, `temperature_bug` and `stock_value` that way and not as an
agent. So when an agent that writes in blocks stalls with a change still to make, gaffer
asks once more outside the conversation: the task, the files it has read as they are
now, the last failure, what the model said, and how to write a block; tools off. The
blocks of that reply are written like any others (read-before-edit, protected paths,
logged with `from_block`), and the agent is told what was written and carries on.
Aider's architect and editor modes split planning from writing in the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from workers.aids.file_blocks import HOW_TO_WRITE, blocks_of, write_blocks
from workers.guards.test_runs import is_test_file
from workers.guards.verification import judge
from workers.hooks import Aid, FilesSeen, Resume, View
from workers.tools.base import ToolError
from workers.tools.workspace import read_confined

# Each one costs a call with a fresh prompt (no server cache); two cover a stall before
# the first write and one after a failed test.
MAX_FOCUSED_WRITES = 2
MAX_TASK_CHARS = 2000
MAX_SAID_CHARS = 600
MAX_TOLD_CHARS = 3000
# A task that asks for a change in so many words: a verb of change in the imperative, at
# the start of a sentence or after "and", "then", "please" ("Find the bug and fix it").
# A question ("why does add return -1?") asks for none, and never gets a write nobody
# asked for.
_ASKS_FOR_CHANGE = re.compile(
    r"(?:^|[.!:;]\s+|\n\s*|\b(?:and|then|please|to)\s+)"
    r"(fix|add|implement|change|make|write|update|rename|remove|delete|correct|"
    r"support|handle|refactor|replace|convert)\b",
    re.IGNORECASE,
)
ASK_FOR_CHANGE = (
    "Write the change now: only the files you change, corrected. A file written back as "
    "it is changes nothing."
)
TOLD = (
    "gaffer showed you the files as they are now and asked for the change. Your reply:\n\n"
    "{reply}\n\n{written}\n\nNext, run the tests with run_shell."
)


def asks_for_change(task: str) -> bool:
    return bool(_ASKS_FOR_CHANGE.search(task))


def prompt(
    task: str, files: FilesSeen, last_failure: str, said: str, room: int
) -> tuple[str, list[tuple[str, str]]] | None:
    """The one message that asks for the change, and the files it shows (path, text);
    None when the agent has read no file that can be shown. Files are shown as they are
    now, the code first and its tests last, within `room` characters."""

    def now(path: str) -> bytes | None:
        try:
            return read_confined(files.workspace, path, room)
        except ToolError:
            return None

    shown = texts(files.seen, now, room)
    if not shown:
        return None
    parts = [cut(task, MAX_TASK_CHARS), *(f"{path}\n{fenced(text, path)}" for path, text in shown)]
    if last_failure:
        parts.append(f"The last test run failed:\n{last_failure}")
    if said := " ".join(prose(said).split()):
        parts.append(f"What you said about it: {cut(said, MAX_SAID_CHARS)}")
    parts.append(f"{ASK_FOR_CHANGE} {HOW_TO_WRITE}")
    return "\n\n".join(parts), shown


def texts(
    paths: Iterable[str], read: Callable[[str], bytes | None], room: int
) -> list[tuple[str, str]]:
    """(path, text) of the files that can be shown, code first and tests last, within
    `room` characters: one too big, unreadable (`read` gives None) or not UTF-8 is left out."""
    found = []
    for path in sorted(paths, key=is_test_file):
        data = read(path)
        if data is None or len(data) > room:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        room -= len(text)
        found.append((path, text))
    return found


def told(reply: str, written: str) -> str:
    """What the agent is told after the change it was asked for was written."""
    return TOLD.format(reply=cut(reply.strip(), MAX_TOLD_CHARS), written=written)


def prose(text: str) -> str:
    """A reply without its fenced blocks (code it echoed, a call written as text) and the
    path lines above them, its other lines kept and blank runs made one."""
    labels = set()
    for block in blocks_of(text):
        text = text.replace(block.body, "")
        above = [line.strip() for line in block.before.splitlines() if line.strip()]
        if above and len(above[-1].split()) == 1:
            labels.add(above[-1])  # `calc.py`, **calc.py**: the block's path line
    kept = [
        line
        for line in text.splitlines()
        if not line.lstrip().startswith(("```", "~~~")) and line.strip() not in labels
    ]
    return re.sub(r"\n\s*\n(\s*\n)+", "\n\n", "\n".join(kept)).strip()


def fenced(text: str, path: str) -> str:
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * (longest + 1)
    language = "python" if path.endswith(".py") else ""
    newline = "" if text.endswith("\n") else "\n"
    return f"{fence}{language}\n{text}{newline}{fence}"


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class FocusedWrite(Aid):
    """For an agent that writes in blocks and stalls with a change still to make: asked
    for it in a call of its own, the files in front of the model, its blocks written, at
    most MAX_FOCUSED_WRITES times a run. Resumed when anything was written: it has been
    told what, and goes on to test it."""

    def __init__(self) -> None:
        self.asked = 0

    def before_first_step(self, view: View) -> None:
        self.asked = 0

    def when_stuck(self, view: View, said: str) -> Resume | None:
        files = view.files_seen()
        if files is None or self.asked >= MAX_FOCUSED_WRITES or view.spent() or not stalled(view):
            return None
        asked = prompt(view.task, files, view.last_failure, said, view.room_for_files)
        if asked is None:
            return None
        ask, shown = asked
        for path, text in shown:  # each shown counts as read
            view.saw(path, text)
        self.asked += 1
        turn = view.ask_aside(ask)
        changes = sum(bool(fact.modified) for fact in view.facts)
        written = write_blocks(view, turn, "focused")
        if not written or sum(bool(fact.modified) for fact in view.facts) == changes:
            return None
        view.tell(told(turn.text, written), source="focused_write")
        return Resume()


def stalled(view: View) -> bool:
    """Whether a change is still to make: none made and the task asks for one (or a test
    failed), or the tests failed after the last one."""
    verdict = judge(view.facts, view.test_runners)
    failed = bool(view.last_failure)
    if verdict is None:
        return failed or asks_for_change(view.task)
    return failed and not verdict.verified and not verdict.untested
