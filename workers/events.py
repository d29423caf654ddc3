"""The closed vocabulary of events and the emitter that carries them to subscribers.

An agent never prints: it emits events. Subscribers (the jsonl log, the terminal view,
tests) decide what to do with them. Logged events become one jsonl line each; live
events (streamed text, a tool starting) only feed views and are never written.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Literal, get_args

LOG_FORMAT = 2
"""The run log's format, written on its first line as `log_format`. 1: logs without the
key (before 2026-11-30). 2: adds it, `aside` model calls and `focused_write` messages;
every format-1 line still reads the same."""

LoggedEvent = Literal[
    "session_start",
    "session_end",
    "agent_start",
    "agent_end",
    "turn_start",
    "llm_call",
    "llm_retry",
    "tool_call",
    "delegate_start",
    "delegate_end",
    "verification",
    "limit",
    "compaction",
    "mcp_call",
    "user_message",
    "extension",
    "boundary",
]
LiveEvent = Literal["text_delta", "tool_start"]
EventName = LoggedEvent | LiveEvent

LOGGED_EVENTS: frozenset[str] = frozenset(get_args(LoggedEvent))
LIVE_EVENTS: frozenset[str] = frozenset(get_args(LiveEvent))

Record = dict[str, Any]
Subscriber = Callable[[Record], None]


class Emitter:
    """Sends events, stamped with time and bound context, to every subscriber.

    `bind` returns a child emitter sharing the subscribers, so a worker's events carry
    its own `agent_id`, `parent_id` and `profile` without the loop knowing about them.
    """

    def __init__(
        self, subscribers: list[Subscriber] | None = None, context: Record | None = None
    ) -> None:
        self._subscribers = subscribers if subscribers is not None else []
        self._lock = threading.Lock()
        self.context: Record = dict(context or {})

    def subscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            self._subscribers.append(subscriber)

    def bind(self, **context: Any) -> Emitter:
        child = Emitter(self._subscribers, {**self.context, **context})
        child._lock = self._lock
        return child

    def emit(self, event: EventName, **fields: Any) -> None:
        if event not in LOGGED_EVENTS and event not in LIVE_EVENTS:
            raise ValueError(f"unknown event {event!r}")
        record: Record = {"ts": time.time(), "event": event, **self.context, **fields}
        with self._lock:
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            subscriber(record)


class Recorder:
    """A subscriber that keeps every record; for tests and for totals at session end."""

    def __init__(self, *, live: bool = False) -> None:
        self.records: list[Record] = []
        self._live = live
        self._lock = threading.Lock()

    def __call__(self, record: Record) -> None:
        if record["event"] in LIVE_EVENTS and not self._live:
            return
        with self._lock:
            self.records.append(record)

    def of(self, event: str) -> list[Record]:
        with self._lock:
            return [r for r in self.records if r["event"] == event]
