"""The loop's seam for guards: the call-level moments a guard may step in at.

Where an aid (workers/hooks.py) acts for the agent, a guard holds it back or judges it.
The loop (workers/loop.py) and a step's traffic (workers/calls.py) know no guard by name;
they call an agent's guards, in the order assembly gave them, at these moments:

- `before_step`: a step is about to begin. A guard may fit the conversation to the
  window, or stop the run (the window cannot hold it even then);
- `before_model`: a model call is about to be made. A guard may shape it (sample away
  from bad replies, stop at a text);
- `after_model`: its reply came (None: the server could not read one);
- `before_call`: a tool call is about to run. A guard may refuse it (its refusal is the
  call's result) or fit its arguments (a test run gets its suite's deadline);
- `after_call`: its result came. A guard may add to it (point a failed test at its
  failure) and remember what it did;
- `after_batch`: a reply's calls all have their results. Then, as the loop asks: whether
  a guard `stopped` the run, what it has to tell the agent once (`take_nudge`), and
  whether the next reply is asked for with tools off (`take_pause`);
- `stepped_in`: an aid stepped in for a stuck agent: what came before its next reply
  changed;
- `on_answer`: the agent answered. A guard may send the answer back (the gate: the
  check failed, or it claims what it never looked at);
- `stamp`: the answer the run gives, with what the harness checked said beside it.

Each moment does nothing unless a guard says otherwise, so a guard is tested alone and a
new one touches its own file and the assembly line that gives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from workers.facts import Facts
from workers.model import AssistantTurn, Message, Model, ToolCall
from workers.tools.base import ToolResult

if TYPE_CHECKING:
    from workers.check.report import CheckRun
    from workers.limits import Budget
    from workers.log.events import Emitter
    from workers.outcome import LimitHit, Outcome


@dataclass(frozen=True)
class StepStart:
    """A step about to begin: the conversation so far, and what fitting it needs (a
    compaction asks the model for a summary, spends the budget and is logged)."""

    messages: list[Message]
    facts: Sequence[Facts]
    step: int
    model: Model
    budget: Budget
    events: Emitter


@dataclass
class ModelAsk:
    """A model call about to be made, as the guards see it and may shape it."""

    messages: list[Message]
    step: int
    aside: bool = False
    """A call outside the conversation (a prompt of its own): not the agent's reply."""
    vary: int = 0
    """How far it is sampled away from the replies before it (CallOptions.vary)."""
    stop: tuple[str, ...] = ()
    """Texts the reply stops at, for a model that takes them."""
    same_as: int | None = None
    """Once the reply came: the step of an earlier reply it is the same as (logged)."""


@dataclass
class PendingCall:
    """A tool call about to run, as the guards see it: they may refuse it or fit its
    arguments, and see its result."""

    call: ToolCall
    arguments: dict[str, Any] | str
    """Parsed (a string when they do not parse), and fitted by the guards."""
    key: tuple[str, str]
    """What makes two calls the same: the tool and its arguments, key order aside."""
    counted: bool = True
    """The agent's own move, for the repetition guard (not a copy in the same reply, or
    an aid's call it makes unchecked)."""
    refused: bool = False
    """It did not run: its result is a refusal."""
    held_back: bool = False
    """It ran, but its result is not shown: more than the time left could read
    (workers/guards/time_left.py). The agent has not seen what it holds."""
    took: float | None = None
    """Seconds it ran, once it has."""

    @property
    def name(self) -> str:
        return self.call.name


@dataclass(frozen=True)
class Answer:
    """A reply with no call: the agent's answer, as the guards judge it."""

    text: str
    facts: Sequence[Facts]
    looked: bool
    """Whether the conversation has tool results or attached files."""
    asked: str = ""
    """What the agent was asked: its first task."""
    last: bool = False
    """No time is left for another reply: what would go back goes on marked instead (a
    send-back the deadline cuts short ends the agent out of time, with nothing), but for
    an empty answer, which has nothing to lose."""


@dataclass(frozen=True)
class SendBack:
    """The answer goes back to the agent with this message."""

    message: str
    wants_call: bool = False
    """Its next reply must be a call (a test run first)."""


@dataclass(frozen=True)
class Stamped:
    """The answer the run gives, and the check gaffer ran over its change (None: none)."""

    answer: str
    check: CheckRun | None = None
    unsupported: tuple[str, ...] = ()
    """Its claims gaffer found nothing behind (workers/guards/citations.py), as data: a
    report carries them apart from the worker's own words, which could forge the text."""
    not_looked_into: tuple[str, ...] = ()
    """The files its answer names that none of its calls looked inside, as data too."""


class Guard:
    """A check on what the agent does: each moment does nothing unless the guard says
    otherwise."""

    def before_step(self, start: StepStart) -> Outcome | None:
        return None

    def before_model(self, ask: ModelAsk) -> None:
        return None

    def after_model(self, ask: ModelAsk, turn: AssistantTurn | None) -> None:
        return None

    def before_call(self, call: PendingCall) -> ToolResult | None:
        return None

    def after_call(self, call: PendingCall, result: ToolResult) -> ToolResult:
        return result

    def after_batch(self) -> None:
        return None

    def stopped(self) -> LimitHit | None:
        return None

    def take_nudge(self) -> str | None:
        return None

    def take_pause(self) -> bool:
        return False

    def stepped_in(self) -> None:
        return None

    def on_answer(self, answer: Answer) -> SendBack | None:
        return None

    def stamp(self, answer: str, facts: Sequence[Facts]) -> Stamped | None:
        return None


G = TypeVar("G", bound=Guard)


@dataclass
class Guards:
    """An agent's guards, called in order: the first to refuse, stop or send back wins.
    After a model call or a tool call they are called in reverse, as layers unwind: the
    result a guard sees is the one the guards after it have added to."""

    each: Sequence[Guard] = field(default_factory=tuple)

    def find(self, kind: type[G]) -> G | None:
        """The guard of this kind, for what shows it to aids (workers/agent_view.py)."""
        return next((g for g in self.each if isinstance(g, kind)), None)

    def replaced(self, guard: Guard) -> Guards:
        """These guards with `guard` in place of the one of its kind (a chat's context
        keeper outlives one turn's agent)."""
        kind = type(guard)
        return Guards(tuple(guard if type(g) is kind else g for g in self.each))

    def before_step(self, start: StepStart) -> Outcome | None:
        return next((stop for g in self.each if (stop := g.before_step(start))), None)

    def before_model(self, ask: ModelAsk) -> None:
        for guard in self.each:
            guard.before_model(ask)

    def after_model(self, ask: ModelAsk, turn: AssistantTurn | None) -> None:
        for guard in reversed(self.each):
            guard.after_model(ask, turn)

    def before_call(self, call: PendingCall) -> ToolResult | None:
        return next((no for g in self.each if (no := g.before_call(call)) is not None), None)

    def after_call(self, call: PendingCall, result: ToolResult) -> ToolResult:
        for guard in reversed(self.each):  # what a later guard adds, an earlier one sees
            result = guard.after_call(call, result)
        return result

    def after_batch(self) -> None:
        for guard in self.each:
            guard.after_batch()

    def stopped(self) -> LimitHit | None:
        return next((stop for g in self.each if (stop := g.stopped())), None)

    def take_nudge(self) -> str | None:
        nudges = [nudge for g in self.each if (nudge := g.take_nudge())]
        return "\n\n".join(nudges) or None

    def take_pause(self) -> bool:
        return any([g.take_pause() for g in self.each])  # each one's pause is taken

    def stepped_in(self) -> None:
        for guard in self.each:
            guard.stepped_in()

    def on_answer(self, answer: Answer) -> SendBack | None:
        sent = [back for g in self.each if (back := g.on_answer(answer))]  # each sees it
        return sent[0] if sent else None

    def stamp(self, answer: str, facts: Sequence[Facts]) -> Stamped:
        for guard in self.each:
            if (stamped := guard.stamp(answer, facts)) is not None:
                return stamped
        return Stamped(answer)
