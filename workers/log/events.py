"""The emitter that carries events to subscribers.

An agent never prints: it emits events, each a dataclass of workers/log/schema.py.
Subscribers (the jsonl log, the terminal view, tests) decide what to do with them.
Logged events become one jsonl line each; live events (streamed text, a tool starting)
only feed views and are never written.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from workers.log.schema import EVENTS, Event
from workers.log.schema import Record as Record  # the type of a line, for subscribers

LOG_FORMAT = 4
"""The run log's format, written on its first line as `log_format`. 1: logs without the
key (before 2026-11-30). 2: adds it, `aside` model calls and `focused_write` messages.
3: adds `change_set` lines and the `snapshot` of `agent_start`. 4: adds `fresh_attempt`
lines and the `temperature` of a model call. Every older line still reads the same."""

LOGGED_EVENTS: frozenset[str] = frozenset(n for n, e in EVENTS.items() if not e.live)
LIVE_EVENTS: frozenset[str] = frozenset(n for n, e in EVENTS.items() if e.live)

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

    def emit(self, event: Event) -> None:
        record: Record = {"ts": time.time(), "event": event.event, **self.context}
        record.update(event.fields())
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
