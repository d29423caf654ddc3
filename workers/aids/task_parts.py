"""The parts of a task, pointed out to an agent that hands them to workers.

A small model that leads through `delegate` alone splits the job in its first reply,
and splits it by what it sees, not by what was asked: given the demo's survey ("what
each top-level folder is for, where the agent loop lives, how a worker is sandboxed"),
the bundled 1.5B model sent one explorer per folder it had noticed and none to the
loop. The task's own shape says where its parts are: numbered items, several
questions, or a list of clauses after a colon. When it has two or more, the agent is
told them before its first reply, one line each, to give each its own worker; it
still writes the call. (Shown whole tasks to copy, as a JSON array or as lines, the
1.5B model wrote calls its server could not read.) A task with one part is told
nothing.
"""

from __future__ import annotations

import re

from workers.aids.focused_write import asks_for_change
from workers.hooks import Aid, View

MAX_PARTS = 12
MIN_WORDS = 2
_NUMBERED = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*•])\s+(.+)$", re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSES = re.compile(
    r"\s*(?:;|,\s*(?:and\s+)?|\band\s+(?=(?:what|where|which|how|why|who|when)\b))"
)

TOLD = (
    "Your task has {count} parts. Hand them all out in one delegate call with `tasks`, "
    "one self-contained task per part (say what to find and what to report):\n{parts}"
)


def parts_of(task: str) -> list[str]:
    """The task's parts in its own words, or [] when it has fewer than two."""
    for found in (_numbered(task), _questions(task), _clauses(task)):
        parts = [p for p in found if len(p.split()) >= MIN_WORDS]
        if len(parts) >= 2:
            return parts[:MAX_PARTS]
    return []


def _numbered(task: str) -> list[str]:
    return [m.group(1).strip() for m in _NUMBERED.finditer(task)]


def _questions(task: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(task) if s.strip().endswith("?")]


def _clauses(task: str) -> list[str]:
    """The clauses listed after the task's first colon ("Survey X: a, b, and c")."""
    head, colon, rest = task.partition(":")
    if asks_for_change(task):
        return []  # "Fix X: it crashes, and keep the API" is one change, not two jobs
    if not colon or "\n" in head or re.search(r"[.!?]\s+\S", rest.strip()):
        return []  # a list is one sentence after its colon, not the rest of the task
    return [c.strip(" .") for c in _CLAUSES.split(rest.strip()) if c.strip(" .")]


class TaskParts(Aid):
    def before_first_step(self, view: View) -> None:
        if view.looked or not (parts := parts_of(view.latest_request)):
            return
        lines = "\n".join(f"{n}. {part}" for n, part in enumerate(parts, 1))
        view.tell(TOLD.format(count=len(parts), parts=lines), source="task_parts")
