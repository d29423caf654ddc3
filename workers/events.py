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


def _keys(required: str, optional: str = "") -> tuple[frozenset[str], frozenset[str]]:
    return frozenset(required.split()), frozenset(optional.split())


# The keys each event carries (required, then optional), besides the identity every
# record gets from its emitter's binding. logs/README.md says what each one means; a
# test holds the two together, and emit refuses a record that does not fit.
EVENT_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "session_start": _keys(
        "task workspace model base_url gaffer_version pid profile max_steps max_seconds "
        "max_tokens resumed_from"
    ),
    "session_end": _keys(
        "status reason elapsed_s steps tokens prompt_tokens completion_tokens llm_calls "
        "retries tool_calls tool_errors workers"
    ),
    "agent_start": _keys("model tools sandbox max_steps max_seconds max_tokens"),
    "agent_end": _keys("status reason steps tokens tool_calls answer", "traceback"),
    "turn_start": _keys("step"),
    "llm_call": _keys(
        "step model prompt_tokens cached_tokens completion_tokens total_tokens "
        "usage_reported elapsed_s attempt finish_reason tool_calls text calls",
        "aside",
    ),
    "llm_retry": _keys("step attempt error wait_s"),
    "tool_call": _keys(
        "step name tool_call_id args label is_error elapsed_s summary result_preview "
        "result_chars content sandbox",
        "from_block container facts",
    ),
    "delegate_start": _keys(
        "child_id child_profile task tools sandbox parallel_safe max_steps max_seconds max_tokens"
    ),
    "delegate_end": _keys(
        "child_id child_profile status reason steps tokens tool_calls elapsed_s files_changed"
    ),
    "verification": _keys("verdict reason action sent_back"),
    "limit": _keys("limit detail"),
    "compaction": _keys(
        "step reason tokens_before tokens_after tokens_after_is_estimate messages_folded "
        "summary_tokens elapsed_s state"
    ),
    "mcp_call": _keys("server tool args is_error elapsed_s result_preview"),
    "user_message": _keys("content source"),
    "extension": _keys("status", "message tool origin read_only"),
    "boundary": _keys("action what message", "path moved_to paths count"),
    "text_delta": _keys("text step"),
    "tool_start": _keys("step name label"),
}
IDENTITY_KEYS = frozenset({"session_id", "agent_id", "parent_id", "profile"})
"""Bound by an emitter, on every record it sends."""


def misfit(event: str, fields: Record) -> str | None:
    """Why a record's own keys do not fit its event, or None."""
    required, optional = EVENT_KEYS[event]
    if missing := sorted(required - fields.keys()):
        return f"{event} lacks {', '.join(missing)}"
    if unknown := sorted(fields.keys() - required - optional - IDENTITY_KEYS):
        return f"{event} has no key {', '.join(unknown)}"
    return None


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
        if problem := misfit(event, fields):  # a harness bug: the log's schema is closed
            raise ValueError(problem)
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
