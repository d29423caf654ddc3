"""Which change sets `gaffer undo` (or the chat's `/undo`) has put back: one line each in
the workspace's change store, in gaffer's state folder, never in the workspace. `gaffer
diff` marks them as undone, and undoing the whole run later skips them.

A change set is named by a digest of its run, its agent, which of that agent's starts it
was (a chat's top agent has one per turn) and what it changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import time

from workers import state
from workers.changes.snapshots import Store

RECORD = "undone.jsonl"
# A record is read whole at every diff; past this it is damaged or planted, not real use.
MAX_RECORD_BYTES = 4 << 20


def change_set_key(session_id: str, agent_id: str, ordinal: int, content: object) -> str:
    """A change set's name: its run, agent and start, and a digest of what it changed
    (`content`, as its log line holds it), so a log that copies a real run's names with
    other changes names other change sets."""
    named = json.dumps([session_id, agent_id, ordinal, content], sort_keys=True, default=str)
    return hashlib.sha256(named.encode()).hexdigest()


def mark_undone(store: Store, keys: list[str]) -> None:
    """Note that the change sets `keys` were put back, now."""
    now = time.time()
    fd = state.open_append(store.own_folder(), RECORD)
    try:
        os.write(fd, "".join(json.dumps({"key": k, "at": now}) + "\n" for k in keys).encode())
    finally:
        os.close(fd)


def undone(store: Store) -> dict[str, float]:
    """Each change set put back, with when (seconds since the epoch); {} when none was."""
    try:
        fd = os.open(store.folder / RECORD, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}
    with os.fdopen(fd, "rb") as record:
        data = record.read(MAX_RECORD_BYTES)
    found: dict[str, float] = {}
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            entry = json.loads(line)
            found[str(entry["key"])] = float(entry["at"])
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a crash
    return found
