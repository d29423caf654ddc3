"""A model going round in circles is shown what it keeps doing once, then stopped.

Five patterns, judged on what gaffer saw (calls and their results), and the last on the
reply itself:
- the same call again and again: the third in a row is refused, the fourth ends the run;
- the same sequence of 2 to 16 calls with the same results, twice in a row (a failing
  edit, an edit that re-inserts the block, the same failing test run, and round again);
- the same error result three times, whatever call produced it;
- for an agent that edits nothing itself, three calls that each repeat an earlier one
  with the same result, in any order (a small model listing the same folders round and
  round), or four searches in a row that found nothing (a small model looking for the
  task's words one by one as file names: "defin", "object", "hold", "state");
- a reply word for word the one before it (a file written back as it is, with the same
  test run): the result in between taught the model nothing.
The last four get one nudge naming the calls (the reply, for the last; that pattern is
warned about apart from the others); if the agent goes on, it ends with `repetition`.
After a refusal or a nudge, the next reply is asked for with tools off, so an agent that
has what it needs answers instead of asking again. Results are compared with their
numbers masked, so a timing or a line number that moves does not hide a cycle.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from workers.guard_hooks import Answer, Guard, ModelAsk, PendingCall
from workers.guards.citations import found_nothing
from workers.guards.replies import reply_digest
from workers.limits import PAUSE_REPEAT_AT, REFUSE_REPEAT_AT, STOP_REPEAT_AT
from workers.model import AssistantTurn, ToolCall
from workers.outcome import LimitHit
from workers.tools.base import ToolResult

CYCLE_PERIODS = tuple(range(2, 17))
"""Lengths of a repeating sequence of calls worth catching; 1 is the same call again. A
supervisor going round its workers can repeat six or more delegations, and a small model
sends the same batch of ten reads and searches again."""
SAME_ERROR_AT = 3
"""The same error result this many times means the agent is not learning from it."""
REPEATS_AT = 3
"""Calls that each repeat an earlier one, result and all, before a reader is nudged: it
is reading nothing new (a reader changes nothing, so the result could not differ)."""
EMPTY_SEARCHES_AT = 4
"""Searches in a row that found nothing before a reader is nudged toward what it has."""
_NUMBER = re.compile(r"\d+(?:\.\d+)?")

NUDGE = (
    "You are going in circles: {what}{calls}\n"
    "Doing the same again will not change the result. {next_step} If the circle goes on, "
    "the run ends."
)
NEXT_WHEN_PAUSED = (
    "Tools are paused for your next reply: give your final answer with what you know, or "
    "say what you would try instead."
)
NEXT_WHEN_EDITING = (
    "Step back: read the file as it is now, work out from the error why it fails, and make "
    "a different change."
)


@dataclass(frozen=True)
class Seen:
    """One call and its result, as compared for repetition."""

    call: str
    result: str
    is_error: bool
    shown: str
    """A line for the nudge: the call and the start of its result."""
    empty: bool = False
    """A search that found nothing."""


class RepetitionGuard(Guard):
    def __init__(self, pauses: bool = True, hint: str = "", reads_only: bool = False) -> None:
        self._pauses = pauses
        """Whether a refusal or a nudge pauses tools for a reply. Not for an agent that
        edits: with tools off it could only talk, and talk would end its work unfinished."""
        self._reads_only = reads_only
        """The agent edits no file itself: a call that repeats an earlier one with the same
        result learned nothing."""
        self._hint = hint
        """How to make a change, added to refusals and nudges (for a small model that
        keeps reading, which has usually read enough)."""
        self._last: tuple[str, str] | None = None
        self._count = 0
        self._history: list[Seen] = []
        self._nudge: str | None = None
        self._nudged = False
        self._same_nudged = False
        """Warned about a reply the same as the one before it (apart from the calls')."""
        self._cycle_nudge = False
        """The nudge waiting to be shown is about calls, not a reply said again."""
        self._pause = False
        self.stop: LimitHit | None = None
        self._last_reply = ""
        """The digest of the agent's last reply ("" after an aid stepped in)."""
        self._again = False
        """That reply, with text in it, is word for word the one before it."""

    def before_call(self, call: PendingCall) -> ToolResult | None:
        return self.check(call.name, call.key) if call.counted else None

    def after_call(self, call: PendingCall, result: ToolResult) -> ToolResult:
        if call.held_back:  # asked again, it is no repeat: its result was never shown
            self._last = None
        elif call.counted:
            self.observe(call.call, result)
        return result

    def after_model(self, ask: ModelAsk, turn: AssistantTurn | None) -> None:
        if ask.aside or turn is None:
            return
        digest = reply_digest(turn)
        self._again = bool(turn.text.strip()) and digest == self._last_reply
        self._last_reply = digest

    def after_batch(self) -> None:
        if self._again:  # the result before it taught it nothing
            self._again = False
            self.same_reply()

    def stopped(self) -> LimitHit | None:
        return self.stop

    def stepped_in(self) -> None:
        """What came before the next reply changed: it is not the same as the last for
        being word for word the same."""
        self._last_reply = ""

    def on_answer(self, answer: Answer) -> None:
        """An answer sent back (by the gate) asked for looking again: going round again
        is warned about before it ends the run. One not sent back ends the run."""
        self.sent_back()

    def check(self, name: str, key: tuple[str, str]) -> ToolResult | None:
        """Before a call runs: a refusal to send instead, or None to run it."""
        self._count = self._count + 1 if key == self._last else 1
        self._last = key
        if self._count >= STOP_REPEAT_AT:
            self.stop = LimitHit(
                "repetition",
                f"{name} was called {self._count} times in a row with the same arguments",
            )
            return ToolResult(
                output="not run: the run stopped because this call kept repeating", is_error=True
            )
        if self._count >= PAUSE_REPEAT_AT:
            self._pause = self._pauses
            paused = (
                "Tools are paused for your next reply: give your final answer from what you "
                "already have, or say what you would try instead."
                if self._pauses
                else "Use what you already have and make a different call."
            )
            return ToolResult(
                output=f"refused: this is call {self._count} in a row to {name} with the same "
                f"arguments, and its result will not change. {paused} Repeating the call once "
                f"more ends the run.{self._hinted()}",
                summary="refused: repeated call",
                is_error=True,
            )
        if self._count >= REFUSE_REPEAT_AT:
            return ToolResult(
                output=f"not run: you just made this call to {name}, and its result is above. "
                "Make a different call (another file or folder, another search), or give your "
                f"final answer.{self._hinted()}",
                summary="refused: repeated call",
                is_error=True,
            )
        return None

    def observe(self, call: ToolCall, result: ToolResult) -> None:
        """After a call ran: remember it, and look for a cycle ending with it."""
        seen = Seen(
            call=f"{call.name} {_canonical(call.arguments)}",
            result=_masked(result.output),
            is_error=result.is_error,
            shown=f"- {call.name} {_short(call.arguments, 80)} → {_short(result.output, 100)}",
            empty=found_nothing(call.name, result.output),
        )
        self._history.append(seen)
        found = self._cycle() or self._same_error() or self._repeats() or self._empty_searches()
        if found is None:
            return
        self._going_round(*found)

    def same_reply(self) -> None:
        """The agent's reply is word for word the one before it: going round, whatever
        its calls (a file block written back as it is, and the same test run refused).
        Warned once, for this pattern alone; the next time, the run stops."""
        self._going_round("your reply is word for word the one before it.", [], same=True)

    def _going_round(self, what: str, lines: list[str], same: bool = False) -> None:
        """A nudge naming what repeats, once a pattern; after it, the run stops."""
        if self._nudge is not None:
            return  # warned in this batch, and the warning not yet shown
        if self._same_nudged if same else self._nudged:
            self.stop = LimitHit("repetition", f"after a warning, still {what.rstrip(':.')}")
            return
        self._same_nudged |= same
        self._cycle_nudge = not same
        self._pause = self._pauses
        next_step = NEXT_WHEN_PAUSED if self._pauses else NEXT_WHEN_EDITING
        calls = "".join(f"\n{line}" for line in lines)
        self._nudge = NUDGE.format(what=what, calls=calls, next_step=next_step)
        self._nudge += self._hinted()

    def sent_back(self) -> None:
        """The gate sent the answer back to be checked with the tools: looking again is
        what it asked for, so going round again is warned about before it ends the run."""
        self._nudged = False

    def _hinted(self) -> str:
        return f" {self._hint}" if self._hint else ""

    def take_pause(self) -> bool:
        """Whether the next reply is asked for with tools off: an agent caught repeating
        itself is given one turn in which the only way on is an answer."""
        pause, self._pause = self._pause, False
        return pause

    def take_nudge(self) -> str | None:
        """The message to show the agent once, after the batch that completed a cycle."""
        nudge, self._nudge = self._nudge, None
        self._nudged |= nudge is not None and self._cycle_nudge
        return nudge

    def _cycle(self) -> tuple[str, list[str]] | None:
        history = self._history
        for period in CYCLE_PERIODS:
            if len(history) < 2 * period:
                continue
            block, again = history[-2 * period : -period], history[-period:]
            if block == again and len({s.call for s in block}) > 1:
                return (
                    f"your last {period} calls repeat the {period} before them, with the same results:",
                    [s.shown for s in again],
                )
        return None

    def _same_error(self) -> tuple[str, list[str]] | None:
        latest = self._history[-1]
        if not latest.is_error:
            return None
        same = [s for s in self._history if s.is_error and s.result == latest.result]
        if len(same) < SAME_ERROR_AT:
            return None
        return (
            f"the same error came back {len(same)} times:",
            [same[-1].shown],
        )

    def _repeats(self) -> tuple[str, list[str]] | None:
        if not self._reads_only:
            return None
        repeats, seen = [], set()
        for item in self._history:
            if (item.call, item.result) in seen:
                repeats.append(item)
            seen.add((item.call, item.result))
        if not repeats or repeats[-1] is not self._history[-1] or len(repeats) < REPEATS_AT:
            return None
        return (
            f"{len(repeats)} of your calls repeat earlier ones, with the same results:",
            [s.shown for s in repeats[-REPEATS_AT:]],
        )

    def _empty_searches(self) -> tuple[str, list[str]] | None:
        recent = self._history[-EMPTY_SEARCHES_AT:]
        if not self._reads_only or len(recent) < EMPTY_SEARCHES_AT:
            return None
        if not all(seen.empty for seen in recent):
            return None
        return (
            f"your last {EMPTY_SEARCHES_AT} searches found nothing. The map in your "
            "instructions names the files and what each defines; read the one that fits, "
            "or answer from it:",
            [s.shown for s in recent],
        )


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except ValueError:
        return arguments


def _masked(text: str) -> str:
    return " ".join(_NUMBER.sub("#", text[:4000]).split())


def _short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
