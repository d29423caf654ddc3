"""Workers make their first model calls one at a time: the prefix they share is paid once.

Workers started together (a fan-out, or several delegate calls in one reply) send
prompts that begin alike: their profile's instructions, its tools, the workspace at a
glance, about 1,050 of an explorer's first 1,090 tokens. A server with a prompt cache
(llama.cpp's, OpenAI's) computes that prefix for the first request and reuses it for
the next, but only once the first has been processed: sent at once, each request pays
for all of it. On the bundled model on two cores a prompt token costs about 50 ms, and
three first calls sharing a 2,700-token prefix, sent at once, took 285 s (the server's
two slots each computed it); sent one after another to a server that had it, 3-5 s
each. Only the first call waits: later ones begin with the worker's own conversation.
"""

from __future__ import annotations

import threading
from typing import Any

from workers.limits import Budget
from workers.model import AssistantTurn, CallOptions, Message, Model

POLL_S = 0.5
"""How often a waiting worker looks whether its run was cancelled."""


class WarmStart:
    """One per run: the turn its workers' first calls take."""

    def __init__(self) -> None:
        self._first_calls = threading.Lock()

    def model(self, model: Model, budget: Budget) -> Model:
        """`model` for a worker: its first call waits for any other worker's first."""
        return _FirstCallInTurn(model, self._first_calls, budget)


class _FirstCallInTurn:
    def __init__(self, model: Model, turn: threading.Lock, budget: Budget) -> None:
        self.inner, self.turn, self.budget = model, turn, budget
        self.name = model.name
        self.called = False

    def complete(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]],
        options: CallOptions = CallOptions(),
    ) -> AssistantTurn:
        if self.called:
            return self.inner.complete(messages, tools, options)
        self.called = True
        holds = False
        while not (holds := self.turn.acquire(timeout=POLL_S)):
            if self.budget.cancelled():
                break  # stopping: the call below ends at once, or says why not
        try:
            return self.inner.complete(messages, tools, options)
        finally:
            if holds:
                self.turn.release()
