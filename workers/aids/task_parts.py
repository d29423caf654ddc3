"""The parts of a task, pointed out to an agent that hands them to workers.

A small model that leads through `delegate` alone splits the job in its first reply,
and splits it by what it sees, not by what was asked: given the demo's survey ("what
each top-level folder is for, where the agent loop lives, how a worker is sandboxed"),
the bundled 1.5B model sent one explorer per folder it had noticed and none to the
loop. The task's own shape says where its parts are: numbered items, several
questions, or a list of clauses after a colon. When it has two or more, the agent is
told them before its first reply, one line each, with the `tasks` of a delegate call
that gives each its own worker: a small model copies a call it is shown more reliably
than it writes one. It still chooses the call. A task with one part is told nothing.
"""

from __future__ import annotations

import json
import re

from workers.hooks import Aid, View

MAX_PARTS = 12
MIN_WORDS = 2
_NUMBERED = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*•])\s+(.+)$", re.MULTILINE)
_QUESTION = re.compile(r"[^?.!\n]*\?")
_CLAUSES = re.compile(
    r"\s*(?:;|,\s*(?:and\s+)?|\band\s+(?=(?:what|where|which|how|why|who|when)\b))"
)

TOLD = (
    "Your task has {count} parts:\n{parts}\nHand them all out in one delegate call, one "
    "worker each, with `tasks` such as:\n{tasks}"
)
REPORT = "Report what you find, with file paths."


def tasks_for(task: str, parts: list[str]) -> list[str]:
    """Each part as a worker's task: a worker sees nothing else, so a part listed after
    a colon carries what comes before it ("Survey X: where is Y")."""
    head, colon, _ = task.partition(":")
    lead = f"{head.strip()}: " if colon and "\n" not in head and len(head) < 200 else ""
    ended = [part if part.endswith(("?", "!")) else part.rstrip(".") + "." for part in parts]
    return [f"{lead}{part} {REPORT}" for part in ended]


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
    return [q.strip() for q in _QUESTION.findall(task)]


def _clauses(task: str) -> list[str]:
    """The clauses listed after the task's first colon ("Survey X: a, b, and c")."""
    head, colon, rest = task.partition(":")
    if not colon or "\n" in head:
        return []
    return [c.strip(" .") for c in _CLAUSES.split(rest.strip()) if c.strip(" .")]


class TaskParts(Aid):
    def before_first_step(self, view: View) -> None:
        if view.looked or not (parts := parts_of(view.latest_request)):
            return
        lines = "\n".join(f"{n}. {part}" for n, part in enumerate(parts, 1))
        tasks = json.dumps(tasks_for(view.latest_request, parts), indent=1, ensure_ascii=False)
        told = TOLD.format(count=len(parts), parts=lines, tasks=tasks)
        view.tell(told, source="task_parts")
