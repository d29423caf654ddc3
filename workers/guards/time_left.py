"""An agent with a deadline is shown what it has time to read, and answers in time.

A batch's results come in call order. Each from a tool that reads the workspace (and so
can be asked again, narrower) is weighed against the time left at the pace the model's
calls have kept (workers/pace.py): once reading the batch so far would take more than
half the time left less an answer's time, a long result is held back, replaced by a line
saying what reading it would cost. The agent has not seen it, so the guards after this
one do not count it as read (PendingCall.held_back). The same call asked again as it
was is shown as much of its start as the time allows, and the rest said to be left out:
the bundled model, told to ask for less, asked for the same grep eight times over and
spent its steps on it. After the batch, when one more step
and an answer no longer fit, the next reply is asked for with tools off. On the bundled
model a reader that read ten files in one reply spent 197 s of its 342 s reading them,
and the deadline cut its answer: a reply the deadline cuts gives nothing.
"""

from __future__ import annotations

import dataclasses

from workers.guard_hooks import Guard, ModelAsk, PendingCall, StepStart
from workers.guards.context import MASK_MIN_CHARS, stub
from workers.limits import Budget
from workers.model import AssistantTurn, Message
from workers.pace import new_tokens
from workers.tools.base import CHARS_PER_TOKEN, ToolResult

BATCH_SHARE = 0.5
"""The most of the time left one step may spend reading a batch's results: the rest is
for the answer, and one more step."""
CHEAP_SHARE = 0.05
"""A result this cheap to read, against the time left, is shown while the batch is within
its share: holding it back saves next to nothing, and asking again costs a step (the
demo's explorer, an answer's time from its deadline, had a 2 s find_symbol held back of
its 79 s, and answered from nothing)."""
REREADABLE = frozenset({"read_file", "grep", "find_files", "list_dir", "find_symbol"})
"""Tools whose result can be had again, or a narrower one: only theirs are held back."""
PART_SHOWN = (
    "[the first {shown} of {total} lines; the rest would take about {seconds:.0f} s of the "
    "{left:.0f} s left to read: ask for less to see it]"
)
HELD_BACK = (
    "not shown: reading it would take about {seconds:.0f} s of the {left:.0f} s this "
    "agent has left; ask for less (a range of lines, a narrower path or pattern) if you "
    "need it"
)


class TimeKeeper(Guard):
    """Holds back a batch's results the time left cannot pay for, and pauses tools when
    only an answer still fits."""

    def __init__(self) -> None:
        self._budget: Budget | None = None
        self._model = ""
        self._conversation: list[Message] | None = None
        self._shown = 0
        """Tokens of this batch's results shown so far."""
        self._held: set[tuple[str, str]] = set()
        """The calls held back before, as they were asked."""

    def before_step(self, start: StepStart) -> None:
        self._budget, self._model = start.budget, start.model.name

    def before_model(self, ask: ModelAsk) -> None:
        if not ask.aside:
            self._conversation = ask.messages  # the list the loop appends the batch to

    def after_model(self, ask: ModelAsk, turn: AssistantTurn | None) -> None:
        if not ask.aside:
            self._shown = 0  # a new batch

    def after_call(self, call: PendingCall, result: ToolResult) -> ToolResult:
        budget = self._budget
        if budget is None or call.refused or result.is_error or call.name not in REREADABLE:
            return result
        left, pace = budget.seconds_left(), budget.pace(self._model)
        if left is None or not pace.measured():
            return result
        tokens = len(result.output) // CHARS_PER_TOKEN
        room = BATCH_SHARE * left - pace.answer_seconds()
        seconds, batch = pace.seconds_for(tokens, 0), pace.seconds_for(self._shown + tokens, 0)
        cheap = seconds <= CHEAP_SHARE * left and batch <= BATCH_SHARE * left
        if len(result.output) < MASK_MIN_CHARS or batch <= room or cheap:
            self._shown += tokens
            return result
        if call.key in self._held:  # told to ask for less, it asked the same: its start
            fits = int(tokens * max(room, 0.0) / seconds) if seconds > 0 else 0
            return _start_of(result, max(fits * CHARS_PER_TOKEN, MASK_MIN_CHARS), seconds, left)
        self._held.add(call.key)
        call.held_back = True
        why = HELD_BACK.format(seconds=seconds, left=max(left, 0.0))
        return ToolResult(
            output=stub(call.name, call.call.arguments, why),
            summary=f"held back: ~{seconds:.0f} s to read, {left:.0f} s left",
        )

    def take_pause(self) -> bool:
        """After the batch, and what the aids added to it: whether only an answer fits."""
        if self._budget is None or self._conversation is None:
            return False
        return self._budget.no_time_for_another_step(self._model, new_tokens(self._conversation))


def _start_of(result: ToolResult, chars: int, seconds: float, left: float) -> ToolResult:
    """The result's whole lines within `chars`, and a line saying the rest is left out."""
    lines = result.output.splitlines()
    kept: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > chars and kept:
            break
        kept.append(line[:chars])
        used += len(line) + 1
    said = PART_SHOWN.format(
        shown=len(kept), total=len(lines), seconds=seconds, left=max(left, 0.0)
    )
    return dataclasses.replace(
        result,
        output="\n".join([*kept, said]),
        summary=f"{len(kept)} of {len(lines)} lines shown",
    )
