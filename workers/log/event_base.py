"""What every event of the log's schema (workers/log/schema.py) is made of: the base
class that turns an event into its line's keys, and the register of events by name."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

Record = dict[str, Any]


def absent_when_none() -> Any:
    return dataclasses.field(default=None, metadata={"absent_when_none": True})


class Event:
    """A logged or live event. Subclasses set `event` and are frozen dataclasses."""

    event: ClassVar[str]
    """The line's `event` key."""
    live: ClassVar[bool] = False
    """Feeds views only, never written to the log."""
    _keys: ClassVar[tuple[tuple[str, bool], ...]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        EVENTS[cls.event] = cls

    def fields(self) -> Record:
        """The event's own keys, as its line carries them."""
        keys = type(self).__dict__.get("_keys")
        if keys is None:  # worked out once per class: emitting is on every step's path
            keys = tuple(
                (f.name, bool(f.metadata.get("absent_when_none")))
                for f in dataclasses.fields(self)  # type: ignore[arg-type]
            )
            type(self)._keys = keys
        record: Record = {}
        for key, omit_none in keys:
            value = getattr(self, key)
            if value is not None or not omit_none:
                record[key] = value
        return record

    @classmethod
    def keys(cls) -> tuple[frozenset[str], frozenset[str]]:
        """(keys always written, keys written only when set)."""
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        sometimes = {f.name for f in fields if f.metadata.get("absent_when_none")}
        return frozenset(f.name for f in fields) - sometimes, frozenset(sometimes)


EVENTS: dict[str, type[Event]] = {}
"""Every event by name, logged and live."""
