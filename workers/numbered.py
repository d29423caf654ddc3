"""Numbered items: a task's numbered questions, and the lines an answer gives them."""

from __future__ import annotations

import re

_ITEM = re.compile(r"^\s*(\d{1,2})[.)]\s+(.+)$", re.MULTILINE)
_ITEM_OR_BULLET = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*•])\s+(.+)$", re.MULTILINE)
# An answer's item: its number at the line's start, after any markup ("**3.**", "### 3)",
# "- 3:"), then . ) or :.
_ANSWERED = re.compile(r"^[\s*#>_`-]*(\d{1,2})\s*[.):]", re.MULTILINE)


def items(text: str, *, bullets: bool = False) -> list[str]:
    """The text of each line that starts with a number ("1." or "1)"), or with a bullet
    too where `bullets`, in order."""
    found = (_ITEM_OR_BULLET if bullets else _ITEM).finditer(text)
    return [m.group(m.lastindex or 1).strip() for m in found]


def unanswered(task: str, answer: str) -> list[int]:
    """The numbers of a task's numbered questions (two or more, numbered from 1) that
    the answer has no line for; [] for a task with none."""
    asked = [int(m.group(1)) for m in _ITEM.finditer(task)]
    if len(asked) < 2 or asked != list(range(1, len(asked) + 1)):
        return []  # not a numbered list of questions from 1 (steps, years, a quote)
    given = {int(m.group(1)) for m in _ANSWERED.finditer(answer)}
    return [n for n in asked if n not in given]
