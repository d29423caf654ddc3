"""No bad reply asked for again the same way: after one that was cut off, ran into a loop,
could not be read, was empty, or that the run already had, the next call is sampled
differently.

A small model at near-greedy sampling answers the same prompt with the same reply, byte
for byte: told its reply was cut off, or that its code does not parse, it sends the same
again, a minute and more each time. So each call says how many bad replies came just
before it (CallOptions.vary), and the client samples away from them (a higher
temperature, and the repetition penalties its server honours). A reply the run already
had is recognised by its digest and logged (`llm_call`'s `same_as`).
"""

from __future__ import annotations

import hashlib

from workers.guard_hooks import Guard, ModelAsk
from workers.model import AssistantTurn

# Past this many bad replies in a row, the call is sampled as after this many: the
# client's strongest variation is already in use.
MAX_VARY = 4


class ReplyGuard(Guard):
    """Bad replies in a row, and every reply of the run by its digest."""

    def __init__(self) -> None:
        self.in_a_row = 0
        self._counted = False
        """The last reply is counted in `in_a_row` already."""
        self._seen: dict[str, int] = {}
        """A reply's digest → the step that first had it."""

    def before_model(self, ask: ModelAsk) -> None:
        if not ask.aside:
            ask.vary = self.vary()

    def after_model(self, ask: ModelAsk, turn: AssistantTurn | None) -> None:
        if ask.aside:
            return
        if turn is None:
            self.unreadable()
        else:
            ask.same_as = self.observe(turn, ask.step)

    def vary(self) -> int:
        """How far the next call is sampled away from the replies before it (0: as usual)."""
        return min(self.in_a_row, MAX_VARY)

    def observe(self, turn: AssistantTurn, step: int) -> int | None:
        """A reply came: the step of an earlier reply it is the same as, or None. A reply
        is bad when it was cut off, empty, or one the run had already with text in it (a
        call alone made again is the repetition guard's to judge)."""
        digest = reply_digest(turn)
        same_as = self._seen.get(digest)
        self._seen.setdefault(digest, step)
        empty = not turn.text.strip() and not turn.tool_calls  # paused, it wrote nothing
        bad = turn.cut_off or empty or (same_as is not None and bool(turn.text.strip()))
        self.in_a_row = self.in_a_row + 1 if bad else 0
        self._counted = bad
        return same_as

    def unreadable(self) -> None:
        """The server could not read the reply: a bad one."""
        self.in_a_row += 1
        self._counted = True

    def bad(self) -> None:
        """The last reply was a bad one after all (an aid could not act on it), when it
        was not counted as one already."""
        if not self._counted:
            self.in_a_row += 1
        self._counted = True


def reply_digest(turn: AssistantTurn) -> str:
    """The reply as the model wrote it: its text and its calls, not the calls' ids. Space
    at the ends of lines and of the reply is not part of it: the model resends the same
    reply with one more blank line at its end."""
    text = "\n".join(line.rstrip() for line in turn.text.strip().splitlines())
    whole = hashlib.sha256(text.encode("utf-8", "surrogatepass"))
    for call in turn.tool_calls:
        whole.update(b"\0" + call.name.encode() + b"\0")
        whole.update(call.arguments.encode("utf-8", "surrogatepass"))
    return whole.hexdigest()
