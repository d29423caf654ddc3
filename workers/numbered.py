"""Numbered items: a task's numbered questions, and the lines an answer gives them."""

from __future__ import annotations

import re

_ITEM = re.compile(r"^[ \t]*(\d{1,2})[.)][ \t]+(\S.*)$", re.MULTILINE)
_ITEM_OR_BULLET = re.compile(r"^[ \t]*(?:\d{1,2}[.)]|[-*•])[ \t]+(\S.*)$", re.MULTILINE)
# An answer's line for item n: n at the line's start, after any markup or a label
# ("**3.**", "### 3)", "- 3:", "(3)", "[3]", "Q3:", "Question 3 -", "| 3 |", "\"3\":"),
# and not a number that goes on ("1.5B", "3.11").
_ANSWERED = re.compile(
    r"^[ \t*#>_`|\"{-]*(?:q(?:uestion)?[ \t]*)?[(\[]?(\d{1,2})"
    r"(?:[.)](?![\w.])|[:\]|\"]|\*\*|[ \t]+[-–—|:])",
    re.MULTILINE | re.IGNORECASE,
)
MAX_ITEM_CHARS = 300


def items(text: str, *, bullets: bool = False) -> list[str]:
    """The text of each line that starts with a number ("1." or "1)"), or with a bullet
    too where `bullets`, in order."""
    found = (_ITEM_OR_BULLET if bullets else _ITEM).finditer(text)
    return [m.group(m.lastindex or 1).strip() for m in found]


def unanswered(task: str, answer: str) -> list[int]:
    """The numbers of a task's numbered questions (its first run of two or more lines
    numbered in a row, most of them ending in "?") that the answer has no line for; []
    for any other task. Numbered lines after that run (a list it quotes) do not count."""
    found = [(int(m.group(1)), m.group(2).strip()) for m in _ITEM.finditer(task)]
    run = found[:1]
    for number, text in found[1:]:
        if number != run[-1][0] + 1:
            break
        run.append((number, text))
    if len(run) < 2 or 2 * sum(text.endswith("?") for _, text in run) <= len(run):
        return []  # not numbered questions: steps to follow, rules to keep, years
    given = {int(m.group(1)) for m in _ANSWERED.finditer(answer)}
    return [n for n, _ in run if n not in given]


def lines_by_number(answer: str) -> dict[int, str]:
    """Each numbered item of an answer by its number, with the lines under it, on one
    line (the last item for a number: a model may list the questions before answering)."""
    starts = list(_ANSWERED.finditer(answer))
    found: dict[int, str] = {}
    for match, after in zip(starts, [*starts[1:], None], strict=False):
        text = " ".join(answer[match.start() : after.start() if after else None].split())
        if text:
            found[int(match.group(1))] = text[:MAX_ITEM_CHARS]
    return found


def without_items(answer: str, numbers: set[int]) -> str:
    """The answer less each numbered item (with the lines under it) whose number is in
    `numbers`, every one for that number."""
    starts = list(_ANSWERED.finditer(answer))
    if not starts:
        return answer
    kept = [answer[: starts[0].start()]]
    for match, after in zip(starts, [*starts[1:], None], strict=False):
        if int(match.group(1)) not in numbers:
            kept.append(answer[match.start() : after.start() if after else None])
    return "".join(kept).strip()
