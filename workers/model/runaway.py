"""Runaway repetition in a streamed reply, found where it begins so the stream can end there.

Two kinds: a stretch of characters repeated back to back many times (a phrase a small
model cannot stop writing), and, outside a code block, a block of whole lines written
twice and begun a third time (a survey answer going round the same three files until
the output cap; code's like lines are inside a fence, or far shorter).
"""

from __future__ import annotations

from dataclasses import dataclass

# A stretch of text repeated back to back over this many characters is a loop, not code:
# about sixty tokens, longer than any separator line or literal a program spells out.
MIN_RUN_CHARS = 240
# ... and at least this many times: a program may spell out a few like lines (an empty
# 9-by-9 board is nine), a loop goes on for dozens.
MIN_REPEATS = 10
# The longest stretch looked for: a whole line of code (or a few short ones) repeated.
MAX_UNIT_CHARS = 200
# How much new text comes in between two looks: each look compares one slice per unit
# length, so looking at every streamed piece would cost more than the reply.
LOOK_EVERY_CHARS = 32
# A block of whole lines written again back to back: at most this many lines, at least
# this many characters (a line or two of prose; a grid row or a closing brace is less).
MAX_UNIT_LINES = 8
MIN_LINE_UNIT_CHARS = 100
FENCE = "```"


@dataclass(frozen=True)
class Runaway:
    """Where a reply began repeating itself: the text before the repetition and one copy
    is `keep` characters long."""

    keep: int
    unit: str
    repeats: int

    @property
    def said(self) -> str:
        """The repetition in a few words, for the log and the model."""
        shown = self.unit if len(self.unit) <= 40 else self.unit[:39] + "…"
        return f"{shown!r} written {self.repeats} times in a row"


def runaway(text: str) -> Runaway | None:
    """The repetition `text` ends in, when it is a runaway one (the shortest unit that
    repeats); None when it ends in none."""
    return _phrase_loop(text) or _line_loop(text)


def _phrase_loop(text: str) -> Runaway | None:
    size = len(text)
    if size < MIN_RUN_CHARS:
        return None
    for unit in range(1, MAX_UNIT_CHARS + 1):
        run = max(MIN_RUN_CHARS, unit * MIN_REPEATS)
        if run > size:
            return None
        tail = text[-run:]
        if tail[unit:] != tail[:-unit]:
            continue
        start = size - run
        while start > 0 and text[start - 1] == text[start - 1 + unit]:
            start -= 1
        return Runaway(
            keep=start + unit, unit=text[start : start + unit], repeats=(size - start) // unit
        )
    return None


def _line_loop(text: str) -> Runaway | None:
    """A block of whole lines, outside a code block, written twice back to back and its
    first line a third time: the model is going round, and each copy costs seconds."""
    if text.count(FENCE) % 2:
        return None  # inside a code block, where like lines are the program's
    lines = text.split("\n")[:-1]  # the last line may still be coming
    for count in range(1, MAX_UNIT_LINES + 1):
        if len(lines) < 2 * count + 1:
            return None
        unit = lines[-2 * count - 1 : -count - 1]
        if unit != lines[-count - 1 : -1] or lines[-1] != unit[0] or _periodic(unit):
            continue
        said = "\n".join(unit) + "\n"
        if len(said) < MIN_LINE_UNIT_CHARS:
            continue
        start = len(lines) - 2 * count - 1  # where the first copy begins, going further back
        while start >= count and lines[start - count : start] == unit:
            start -= count
        keep = len("\n".join(lines[: start + count])) + 1
        return Runaway(keep=keep, unit=said, repeats=(len(lines) - start) // count)
    return None


def _periodic(unit: list[str]) -> bool:
    """The block is a shorter block over again (nine like rows of a grid are one row)."""
    return any(
        len(unit) % period == 0 and unit == unit[:period] * (len(unit) // period)
        for period in range(1, len(unit))
    )


class Watch:
    """Text fed to it as it streams, looked at for runaway repetition now and then."""

    def __init__(self) -> None:
        self.text = ""
        self._looked_at = 0

    def feed(self, piece: str) -> Runaway | None:
        self.text += piece
        if len(self.text) - self._looked_at < LOOK_EVERY_CHARS:
            return None
        self._looked_at = len(self.text)
        return runaway(self.text)
