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


def item_spans(answer: str) -> dict[int, tuple[int, int]]:
    """Where each numbered item of an answer is, by its number, with the lines under it:
    the last item of a number (a model may list the questions before answering), of
    those at the list's least indent (a list nested in an item is the item's), up to
    the next such item or to a paragraph after it that is not indented (what follows
    the list is no item's)."""
    starts = list(_ANSWERED.finditer(answer))
    if not starts:
        return {}
    least = min(_indent(answer, match) for match in starts)
    tops = [match for match in starts if _indent(answer, match) == least]
    spans: dict[int, tuple[int, int]] = {}
    for match, after in zip(tops, [*tops[1:], None], strict=False):
        end = after.start() if after else len(answer)
        if gap := _PARAGRAPH.search(answer, match.end(), end):
            end = gap.start()
        spans[int(match.group(1))] = (match.start(), end)
    return spans


_PARAGRAPH = re.compile(r"\n[ \t]*\n(?=\S)")


def _indent(answer: str, match: re.Match[str]) -> int:
    line = answer[match.start() : match.end()]
    return len(line) - len(line.lstrip(" \t"))


def without_items(answer: str, numbers: set[int]) -> str:
    """The answer less the items (item_spans) whose numbers are in `numbers`."""
    kept, at = [], 0
    for start, end in sorted(span for n, span in item_spans(answer).items() if n in numbers):
        kept.append(answer[at:start])
        at = end
    return re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", "".join(kept) + answer[at:]).strip()
