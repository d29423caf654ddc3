"""The run log: every logged event becomes one JSON line, written whole and flushed."""

from __future__ import annotations

import datetime as dt
import os
import threading
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, TextIO

import structlog

from workers.log.events import LOG_FORMAT, LOGGED_EVENTS, Record
from workers.state import open_append

_FIRST_KEYS = ("ts", "event", "session_id", "agent_id", "parent_id", "profile")


def _readable(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> dict[str, Any]:
    """ISO timestamps, and the identifying keys first so a line reads left to right."""
    ts = event_dict.get("ts")
    if isinstance(ts, float):
        event_dict["ts"] = dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="milliseconds")
    first = {k: event_dict.pop(k) for k in _FIRST_KEYS if k in event_dict}
    return {**first, **event_dict}


class JsonlLog:
    """A subscriber writing one jsonl file per run.

    structlog's WriteLogger takes a per-file lock around write+flush, so lines from
    many threads never interleave, and a `kill -9` loses at most the line being written.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.failure: str | None = None
        """Why the log stopped being written (a full disk); the run goes on without it."""
        # Never through a link planted by that name in a log folder the user chose.
        self._file: TextIO = os.fdopen(open_append(path.parent, path.name), "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._first = self._file.tell() == 0  # the first line says which format this is
        self._logger = structlog.wrap_logger(
            structlog.WriteLogger(self._file),
            processors=[_readable, structlog.processors.JSONRenderer(default=str)],
            wrapper_class=structlog.BoundLogger,
        )

    def __call__(self, record: Record) -> None:
        if record["event"] not in LOGGED_EVENTS or self._file.closed:
            return
        fields = dict(record)
        event = fields.pop("event")
        with self._lock:
            if self.failure is not None:
                return
            if self._first:
                fields["log_format"] = LOG_FORMAT
                self._first = False
            try:
                self._logger.msg(event, **fields)
            except OSError as error:  # the answer matters more than the log: go on
                self.failure = f"{error.strerror or error}"

    def close(self) -> None:
        try:
            self._file.close()
        except OSError as error:
            self.failure = self.failure or f"{error.strerror or error}"
