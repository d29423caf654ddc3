"""Runaway repetition in a streamed reply, found where it begins so the stream can end there."""

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
