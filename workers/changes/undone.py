"""Which change sets `gaffer undo` (or the chat's `/undo`) has put back: one line each in
the workspace's change store, in gaffer's state folder, never in the workspace. `gaffer
diff` marks them as undone, and undoing the whole run later skips them.

Each undo also writes one line of the files it wrote, as it found and as it left them
(their contents in the store), so `gaffer redo` can put them back; a redo writes a line
naming that undo, and its change sets count as in effect again. Lines of an older gaffer
({"key", "at"}) still read; they cannot be redone.

A change set is named by a digest of its run, its agent, which of that agent's starts it
was (a chat's top agent has one per turn) and what it changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from collections.abc import Sequence
from typing import Any

from workers import state
from workers.changes.snapshots import Entry, Store
from workers.changes.undo import FileUndo

RECORD = "undone.jsonl"
# A record is read whole at every diff; past this it is damaged or planted, not real use.
MAX_RECORD_BYTES = 4 << 20


def change_set_key(session_id: str, agent_id: str, ordinal: int, content: object) -> str:
    """A change set's name: its run, agent and start, and a digest of what it changed
    (`content`, as its log line holds it), so a log that copies a real run's names with
    other changes names other change sets."""
    named = json.dumps([session_id, agent_id, ordinal, content], sort_keys=True, default=str)
    return hashlib.sha256(named.encode()).hexdigest()


def mark_undone(
    store: Store, keys: list[str], files: Sequence[FileUndo] = (), refused: Sequence[str] = ()
) -> None:
    """Note that the change sets `keys` were put back, now, writing `files`; the paths
    `refused` stay in effect."""
    now = time.time()
    undo_id = secrets.token_hex(8)
    kept = {"refused": sorted(refused)} if refused else {}
    lines = [{"key": k, "at": now, "undo": undo_id} | kept for k in keys]
    lines.append({"undo": undo_id, "at": now, "files": [_file_json(f) for f in files]})
    _append(store, lines)


def mark_redone(store: Store, undo_id: str) -> None:
    """Note that the undo `undo_id` was taken back: its change sets are in effect again."""
    _append(store, [{"redo": undo_id, "at": time.time()}])


def _append(store: Store, lines: list[dict[str, Any]]) -> None:
    fd = state.open_append(store.own_folder(), RECORD)
    try:
        os.write(fd, "".join(json.dumps(line) + "\n" for line in lines).encode())
    finally:
        os.close(fd)


def undone(store: Store) -> dict[str, float]:
    """Each change set put back and not redone since, with when (seconds since the
    epoch); {} when none was."""
    found: dict[str, tuple[float, str]] = {}
    for entry in _lines(store):
        if "key" in entry:
            found[entry["key"]] = (entry["at"], entry["undo"])
        elif "redo" in entry:
            found = {k: v for k, v in found.items() if v[1] != entry["redo"]}
    return {key: at for key, (at, _) in found.items()}


def refused_paths(store: Store) -> dict[str, list[str]]:
    """By change set marked undone: the paths undo refused there, still in effect."""
    found: dict[str, tuple[str, list[str]]] = {}
    for entry in _lines(store):
        if "key" in entry:
            found[entry["key"]] = (entry["undo"], entry["refused"])
        elif "redo" in entry:
            found = {k: v for k, v in found.items() if v[0] != entry["redo"]}
    return {key: paths for key, (_, paths) in found.items() if paths}


def last_undo(store: Store) -> tuple[str, list[FileUndo]] | None:
    """The latest undo not redone yet: its id and the files it wrote; None when none."""
    undos: list[tuple[str, list[FileUndo]]] = []
    for entry in _lines(store):
        if "files" in entry:
            undos.append((entry["undo"], entry["files"]))
        elif "redo" in entry:
            undos = [u for u in undos if u[0] != entry["redo"]]
    return undos[-1] if undos else None


def _lines(store: Store) -> list[dict[str, Any]]:
    try:
        fd = os.open(store.folder / RECORD, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    with os.fdopen(fd, "rb") as record:
        data = record.read(MAX_RECORD_BYTES)
    found = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            found.append(_valid(json.loads(line)))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # a line cut short by a crash
    return found


def _valid(entry: Any) -> dict[str, Any]:
    """A line as this module writes it, its values typed (an error when it is not)."""
    if not isinstance(entry, dict):
        raise TypeError("not a record")
    if "key" in entry:
        return {
            "key": str(entry["key"]),
            "at": float(entry["at"]),
            "undo": str(entry.get("undo") or ""),
            "refused": [str(path) for path in entry.get("refused", [])],
        }
    if "files" in entry:
        return {"undo": str(entry["undo"]), "files": [_file(f) for f in entry["files"]]}
    if "redo" in entry:
        return {"redo": str(entry["redo"])}
    return {}


def _file_json(file: FileUndo) -> dict[str, Any]:
    return {"path": file.path, "found": _entry_json(file.found), "left": _entry_json(file.left)}


def _entry_json(entry: Entry | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    return {
        "sha256": entry.digest,
        "mode": f"{entry.mode:o}",
        "size": entry.size,
        "kept": entry.kept,
    }


def _file(data: dict[str, Any]) -> FileUndo:
    return FileUndo(str(data["path"]), _entry(data["found"]), _entry(data["left"]))


def _entry(data: dict[str, Any] | None) -> Entry | None:
    if data is None:
        return None
    return Entry(str(data["sha256"]), int(data["mode"], 8), int(data["size"]), bool(data["kept"]))
