"""An agent with a deadline is shown what it has time to read, and answers in time.

After each batch of calls, what the next prompt adds (the batch's results) is weighed
against the time left, at the pace the endpoint has kept so far (workers/pace.py). The
largest results are held back, each replaced by a line saying what reading it would
cost, while the next step would take more than half the time left; then, if one more
step and an answer still do not fit, the next reply is asked for with tools off. On the
bundled model a reader that read ten files in one reply spent 197 s of its 342 s reading
them, and the deadline cut its answer: a reply the deadline cuts gives nothing.
"""

from __future__ import annotations

from workers.guard_hooks import Guard, ModelAsk, StepStart
from workers.guards.context import mask_latest
from workers.limits import Budget
from workers.model import Message
from workers.tools.base import CHARS_PER_TOKEN

BATCH_SHARE = 0.5
"""The most of the time left one step may spend reading a batch's results: the rest is
for the answer, and one more step."""
HELD_BACK = (
    "not shown: reading it would take about {seconds:.0f} s, and this agent has "
    "{left:.0f} s left; read a part of it (offset and limit) or search for what you need"
)


class TimeKeeper(Guard):
    """Holds back a batch's results the time left cannot pay for, and pauses tools when
    only an answer still fits."""

    def __init__(self) -> None:
        self._budget: Budget | None = None
        self._conversation: list[Message] | None = None
        self._pause = False

    def before_step(self, start: StepStart) -> None:
        self._budget = start.budget

    def before_model(self, ask: ModelAsk) -> None:
        if not ask.aside:
            self._conversation = ask.messages  # the list the loop appends the batch to

    def after_batch(self) -> None:
        budget, messages = self._budget, self._conversation
        left = budget.seconds_left() if budget is not None else None
        if budget is None or messages is None or left is None or not budget.pace.known():
            return
        pace = budget.pace

        def fits() -> bool:
            return pace.seconds_for(_new_tokens(messages)) <= BATCH_SHARE * left

        def why(content: str) -> str:
            seconds = pace.seconds_for(len(content) // CHARS_PER_TOKEN, 0)
            return HELD_BACK.format(seconds=seconds, left=left)

        if not fits():
            mask_latest(messages, fits, why)
        self._pause = budget.no_time_for_another_step(_new_tokens(messages))

    def take_pause(self) -> bool:
        pause, self._pause = self._pause, False
        return pause


def _new_tokens(messages: list[Message]) -> int:
    """Tokens the next prompt adds to the last one: what came after the last reply."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    return sum(len(str(m.get("content") or "")) for m in messages[last + 1 :]) // CHARS_PER_TOKEN
