"""Limits and budgets: how far an agent may go, and what the whole run has left."""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from workers.pace import Pace

DEFAULT_MAX_STEPS = 30
# An identical call right after itself can only return the same result: the second is
# refused, the third refused with the next reply asked for with tools off, the fourth
# ends the run. A model stuck in a loop gets clear warnings, not an endless bill.
REFUSE_REPEAT_AT = 2
PAUSE_REPEAT_AT = 3
STOP_REPEAT_AT = 4


@dataclass(frozen=True)
class Limits:
    max_steps: int = DEFAULT_MAX_STEPS
    """Model calls one agent may make."""
    max_seconds: float | None = None
    """Wall-clock seconds for the agent, tools included."""
    max_tokens: int | None = None
    """Prompt plus completion tokens, as the endpoint reports them."""


Pricer = Callable[[str, int, int, int], float | None]
"""A model call's cost in dollars: (model, prompt, cached, completion tokens); None
when the model has no price."""


class Budget:
    """Tokens, time and cancellation, shared down a tree of agents.

    The run owns the root budget; each agent gets a child capped by its own limits, so
    a worker can never outspend what the run has left. Spending in a child spends in
    every parent; cancelling a parent cancels every child, and tells whoever waits on
    one (`on_cancel`) at once, so no waiter has to poll.
    """

    def __init__(
        self,
        max_tokens: int | None = None,
        max_seconds: float | None = None,
        parent: Budget | None = None,
        *,
        max_cost: float | None = None,
        price: Pricer | None = None,
    ) -> None:
        self.max_tokens = max_tokens
        self.deadline = time.monotonic() + max_seconds if max_seconds is not None else None
        self.parent = parent
        self.used = 0
        self.max_cost = max_cost
        """Dollars the run may spend on model calls (set at the root: --max-cost)."""
        self.cost = 0.0
        self._price: Pricer | None = price if price is not None else getattr(parent, "_price", None)
        self._paces: dict[str, Pace] = {}
        """Each model's pace, kept at the root for the whole tree of agents (`pace`)."""
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._children: weakref.WeakSet[Budget] = weakref.WeakSet()
        self._on_cancel: list[Callable[[], None]] = []

    def child(self, limits: Limits) -> Budget:
        child = Budget(limits.max_tokens, limits.max_seconds, parent=self)
        with self._lock:
            self._children.add(child)
        if self.cancelled():
            child.cancel()
        return child

    def spend(self, tokens: int) -> None:
        with self._lock:
            self.used += tokens
        if self.parent is not None:
            self.parent.spend(tokens)

    def spend_cost(self, model: str, prompt: int, cached: int, completion: int) -> None:
        """A model call's cost, spent here and in every parent. A model with no price
        costs nothing known: a run under --max-cost has every model priced first."""
        dollars = self._price(model, prompt, cached, completion) if self._price else None
        if dollars:
            self._spent(dollars)

    def _spent(self, dollars: float) -> None:
        with self._lock:
            self.cost += dollars
        if self.parent is not None:
            self.parent._spent(dollars)

    def cost_left(self) -> float | None:
        mine = None if self.max_cost is None else self.max_cost - self.cost
        theirs = self.parent.cost_left() if self.parent is not None else None
        return least(mine, theirs)

    def spent_dollars(self) -> float:
        """What the whole run has spent: the root's count."""
        return self.parent.spent_dollars() if self.parent is not None else self.cost

    def tokens_left(self) -> int | None:
        mine = None if self.max_tokens is None else self.max_tokens - self.used
        theirs = self.parent.tokens_left() if self.parent is not None else None
        return least(mine, theirs)

    def deadline_at(self) -> float | None:
        theirs = self.parent.deadline_at() if self.parent is not None else None
        return least(self.deadline, theirs)

    def cancel(self) -> None:
        self._cancelled.set()
        with self._lock:
            children, callbacks = list(self._children), list(self._on_cancel)
        for child in children:
            child.cancel()
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` when this budget is cancelled (at once if it already is);
        returns what unregisters it."""
        with self._lock:
            self._on_cancel.append(callback)
        if self.cancelled():
            callback()

        def unregister() -> None:
            with self._lock:
                if callback in self._on_cancel:
                    self._on_cancel.remove(callback)

        return unregister

    def cancelled(self) -> bool:
        return self._cancelled.is_set() or (self.parent is not None and self.parent.cancelled())

    def pace(self, model: str) -> Pace:
        """How long calls to `model` take, as this run's calls to it have shown."""
        if self.parent is not None:
            return self.parent.pace(model)
        with self._lock:
            return self._paces.setdefault(model, Pace())

    def no_time_for_another_step(self, model: str, new_tokens: int = 0) -> bool:
        """Whether the time left holds less than one more step of `model`'s, reading
        `new_tokens` the server has not seen, and then an answer. A call the deadline
        cuts short gives nothing, so an agent this close answers now with what it has."""
        left, pace = self.seconds_left(), self.pace(model)
        if left is None or not pace.known():
            return False
        return left < pace.seconds_for(new_tokens) + pace.answer_seconds()

    def seconds_left(self) -> float | None:
        deadline = self.deadline_at()
        return None if deadline is None else deadline - time.monotonic()


WORKER_TIME_SHARE = 0.75
"""The most of its caller's time left a worker may use, so the caller can still read
the reports and answer: on the bundled model a survey's ten explorers used all of a
360 s run, and the dispatcher that sent them never answered."""


JOINING_TIME_SHARE = 0.95
"""A caller that gives its workers' answers joined as its own writes none after them
(workers/aids/joined_reports.py): its workers may use nearly all its time."""


def worker_limits(limits: Limits, caller: Budget, share: float = WORKER_TIME_SHARE) -> Limits:
    """A worker's own limits, its time capped at its `share` of what its caller has left."""
    left = caller.seconds_left()
    if left is None:
        return limits
    share = max(left * share, 0.0)
    return dataclasses.replace(limits, max_seconds=min(limits.max_seconds or share, share))


N = TypeVar("N", int, float)


def least(a: N | None, b: N | None) -> N | None:
    """The smaller of two bounds, None being no bound."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
