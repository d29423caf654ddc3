"""Reading a run log back as its writer wrote it: each line becomes the event's own
dataclass (workers/log/schema.py), with who wrote it and when.

Older formats are handled here, once: a key an older gaffer did not write takes its
field's default, or the empty value of its type (None where None is allowed); so does a
value of the wrong type, since a log can be planted by a repository. A line of
an event this gaffer does not know, or one that is not a whole JSON object (a run killed
mid-write), is skipped; a log in a newer format is refused whole, never half-understood.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from workers.log.events import LOG_FORMAT
from workers.log.schema import EVENTS, Event, Record

E = TypeVar("E", bound=Event)


class RunUnreadable(Exception):
    """A run log this gaffer cannot read: written by a newer one, or not a run log."""


@dataclass(frozen=True)
class Line:
    """One line of a run log: the event, and the identity its emitter was bound to."""

    event: Event
    ts: float = 0.0
    """When it was emitted, in seconds since the epoch (0.0 when the line says not)."""
    session_id: str = ""
    agent_id: str = ""
    parent_id: str | None = None
    profile: str | None = None
    node: str | None = None
    """The cluster node a worker's tools ran on."""


def read_lines(path: Path) -> list[Line]:
    """Every line of the log at `path` this gaffer knows, in order."""
    return lines_of(read_raw(path))


def lines_of(records: Iterable[Record]) -> list[Line]:
    """The records (a log's, or a live emitter's) as lines; unknown events left out."""
    return [line for record in records if (line := line_of(record)) is not None]


def line_of(record: Record) -> Line | None:
    """The record as its event's dataclass, or None for an event this gaffer does not know."""
    kind = EVENTS.get(str(record.get("event")))
    if kind is None:
        return None
    return Line(
        event=_event(kind, record),
        ts=_seconds(record.get("ts")),
        session_id=str(record.get("session_id") or ""),
        agent_id=str(record.get("agent_id") or ""),
        parent_id=_text_or_none(record.get("parent_id")),
        profile=_text_or_none(record.get("profile")),
        node=_text_or_none(record.get("node")),
    )


def of_type(lines: Iterable[Line], kind: type[E]) -> list[tuple[Line, E]]:
    """The lines of one event, each with its event typed."""
    return [(line, line.event) for line in lines if isinstance(line.event, kind)]


def events_of(records: Iterable[Record], kind: type[E]) -> list[E]:
    """The events of one kind among the records (a Recorder's, say), typed."""
    return [
        e for _, e in of_type(lines_of(r for r in records if r.get("event") == kind.event), kind)
    ]


def read_raw(path: Path) -> list[Record]:
    """Every whole line as written; a torn last line (a run killed mid-write) is skipped.
    RunUnreadable for a log in a format newer than this gaffer's."""
    records = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for text in f:
            try:
                record = json.loads(text)
            except ValueError:  # a torn line, or a number too long to read
                continue
            if isinstance(record, dict):
                records.append(record)
    version = records[0].get("log_format", 1) if records else LOG_FORMAT
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RunUnreadable(f"{path.name} says its log format is {version!r}: not a run log")
    if version > LOG_FORMAT:
        raise RunUnreadable(
            f"{path.name} is in log format {version}, written by a newer gaffer; this one "
            f"reads formats 1 to {LOG_FORMAT}: upgrade gaffer to read it"
        )
    return records


def _event(kind: type[Event], record: Record) -> Event:
    values = {}
    for name, (hint, default) in _fields(kind).items():
        value = record.get(name, dataclasses.MISSING)
        if value is dataclasses.MISSING or not _fits(value, hint):
            value = default() if callable(default) else _empty(hint)
        values[name] = value
    return kind(**values)


_FIELDS: dict[str, dict[str, tuple[Any, Any]]] = {}


def _fields(kind: type[Event]) -> dict[str, tuple[Any, Any]]:
    """Each field of the event: its type, and what makes its default (None: no default),
    worked out once per event."""
    if (known := _FIELDS.get(kind.event)) is not None:
        return known
    hints = typing.get_type_hints(kind)
    found = _FIELDS[kind.event] = {}
    for field in dataclasses.fields(kind):  # type: ignore[arg-type]
        default: Any = None
        if field.default_factory is not dataclasses.MISSING:
            default = field.default_factory
        elif field.default is not dataclasses.MISSING:
            default = functools.partial(copy.copy, field.default)
        found[field.name] = (hints[field.name], default)
    return found


def _fits(value: Any, hint: Any) -> bool:
    """Whether a value read from a line is of the field's type, all the way in: a line
    can be planted by a repository, and a reader must not trip on it."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arm) for arm in args)
    if origin is list:
        return isinstance(value, list) and all(_fits(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            _fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items()
        )
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _empty(hint: Any) -> Any:
    """What a key an older format did not write (or wrote with the wrong type) reads as:
    None where the type allows it, else the type's empty value."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint):
        return None
    base = origin or hint
    empties: dict[Any, Any] = {str: "", int: 0, float: 0.0, bool: False}
    return [] if base is list else {} if base is dict else empties.get(base)


def _seconds(ts: Any) -> float:
    """A line's time: ISO 8601 as written, or seconds as a live emitter stamps it; 0.0
    when it is neither, or no time a clock can show."""
    try:
        if isinstance(ts, str):
            seconds = datetime.fromisoformat(ts).timestamp()
        elif isinstance(ts, int | float) and not isinstance(ts, bool):
            seconds = float(ts)
        else:
            return 0.0
        datetime.fromtimestamp(seconds, UTC)  # a time a clock can show, or not
    except (ValueError, OverflowError, OSError):
        return 0.0
    return seconds


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)
