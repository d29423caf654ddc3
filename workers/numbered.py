"""Numbered items: a task's numbered questions, and the lines an answer gives them."""

from __future__ import annotations

import re

_ITEM = re.compile(r"^[ \t]*(\d{1,2})[.)][ \t]+(\S.*)$", re.MULTILINE)
_ITEM_OR_BULLET = re.compile(r"^[ \t]*(?:\d{1,2}[.)]|[-*•])[ \t]+(\S.*)$", re.MULTILINE)
# An answer's line for item n: n at the line's start, after any markup or a label
# ("**3.**", "### 3)", "- 3:", "(3)", "[3]", "Q3:", "Question 3 -", "| 3 |", "\"3\":").
_ANSWERED = re.compile(
    r"^[\s*#>_`|\"{-]*(?:q(?:uestion)?[ \t]*)?[(\[]?(\d{1,2})"
    r"(?:[.):\]|\"]|\*\*|[ \t]+[-–—|:])",
    re.MULTILINE | re.IGNORECASE,
)


def items(text: str, *, bullets: bool = False) -> list[str]:
    """The text of each line that starts with a number ("1." or "1)"), or with a bullet
    too where `bullets`, in order."""
    found = (_ITEM_OR_BULLET if bullets else _ITEM).finditer(text)
    return [m.group(m.lastindex or 1).strip() for m in found]


def unanswered(task: str, answer: str) -> list[int]:
    """The numbers of a task's numbered questions (two or more, numbered in a row, most
    of them ending in "?") that the answer has no line for; [] for any other task."""
    found = [(int(m.group(1)), m.group(2).strip()) for m in _ITEM.finditer(task)]
    numbers = [n for n, _ in found]
    asked = sum(text.endswith("?") for _, text in found)
    if len(found) < 2 or numbers != list(range(numbers[0], numbers[0] + len(found))):
        return []  # not a numbered list (steps, years, a quote)
    if 2 * asked <= len(found):
        return []  # steps to follow, rules to keep: not questions to answer one by one
    given = {int(m.group(1)) for m in _ANSWERED.finditer(answer)}
    return [n for n in numbers if n not in given]


def lines_by_number(answer: str) -> dict[int, str]:
    """Each numbered line of an answer, by its number (the first line for a number)."""
    found: dict[int, str] = {}
    for match in _ANSWERED.finditer(answer):
        end = answer.find("\n", match.start())
        found.setdefault(int(match.group(1)), answer[match.start() : None if end < 0 else end])
    return {n: line.strip() for n, line in found.items()}
