"""What an agent changed in the workspace, as the harness saw it: the difference of two
snapshots (workers/changes/snapshots.py), whatever made it. Shown as a unified diff, recorded in
the log, and put back by `gaffer undo`.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass
from typing import Any, Literal

from workers.changes.snapshots import LINK_MODE, Entry, Store, Tree

Kind = Literal["added", "modified", "deleted", "renamed", "mode"]


@dataclass(frozen=True)
class Change:
    path: str
    kind: Kind
    before: Entry | None
    after: Entry | None
    old_path: str | None = None
    """Where a renamed file was."""
    shared: bool = False
    """Someone else changed this file too, between the agent's calls: its `before` is not
    all the agent's, so undo will not put it back whole."""

    @property
    def label(self) -> str:
        if self.kind == "renamed":
            return f"{self.old_path} → {self.path} (renamed)"
        return f"{self.path} ({self.kind})"

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path, "change": self.kind}
        if self.old_path is not None:
            data["old_path"] = self.old_path
        if self.shared:
            data["shared"] = True
        for side in ("before", "after"):
            entry: Entry | None = getattr(self, side)
            if entry is not None:
                data[side] = {
                    "sha256": entry.digest,
                    "size": entry.size,
                    "mode": f"{entry.mode:o}",
                    "kept": entry.kept,
                }
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Change:
        def entry(side: str) -> Entry | None:
            value = data.get(side)
            if value is None:
                return None
            return Entry(
                str(value["sha256"]), int(value["mode"], 8), int(value["size"]), bool(value["kept"])
            )

        kind = data["change"]
        if kind not in ("added", "modified", "deleted", "renamed", "mode"):
            raise ValueError(f"unknown change {kind!r}")
        return cls(
            str(data["path"]),
            kind,
            entry("before"),
            entry("after"),
            data.get("old_path"),
            shared=data.get("shared") is True,
        )


def compare(before: Tree, after: Tree) -> list[Change]:
    """Every file added, deleted, modified or with a new mode, by path; a deleted file
    whose exact content reappears under a new path is one rename."""
    changes: list[Change] = []
    added = {p: e for p, e in after.items() if p not in before}
    deleted = {p: e for p, e in before.items() if p not in after}
    by_content: dict[str, list[str]] = {}
    for path, entry in sorted(deleted.items()):
        by_content.setdefault(entry.digest, []).append(path)
    for path, entry in sorted(added.items()):
        olds = by_content.get(entry.digest)
        if olds:
            gone = olds.pop(0)
            changes.append(Change(path, "renamed", deleted.pop(gone), entry, old_path=gone))
        else:
            changes.append(Change(path, "added", None, entry))
    changes.extend(Change(p, "deleted", e, None) for p, e in deleted.items())
    for path in before.keys() & after.keys():
        was, now = before[path], after[path]
        if was.digest != now.digest:
            changes.append(Change(path, "modified", was, now))
        elif was.mode != now.mode:
            changes.append(Change(path, "mode", was, now))
    return sorted(changes, key=lambda c: c.path)


def combine(steps: list[list[Change]]) -> list[Change]:
    """Change sets made one after another as one: each path from its first `before` to
    its last `after` (renames taken as a deletion and an addition). A path whose next
    step does not start where the last one ended was changed by someone else in between:
    it is marked `shared`."""
    first: dict[str, Entry | None] = {}
    last: dict[str, Entry | None] = {}
    shared: set[str] = set()
    for changes in steps:
        for change in changes:
            moves = [(change.path, change.before, change.after)]
            if change.old_path is not None:
                moves = [(change.old_path, change.before, None), (change.path, None, change.after)]
            for path, was, now in moves:
                if change.shared or (path in last and last[path] != was):
                    shared.add(path)
                first.setdefault(path, was)
                last[path] = now
    before = {p: e for p, e in first.items() if e is not None}
    after = {p: e for p, e in last.items() if e is not None}
    return [
        dataclasses.replace(c, shared=True) if {c.path, c.old_path} & shared else c
        for c in compare(before, after)
    ]


# -- showing a change set ---------------------------------------------------------

MAX_DIFF_LINES_PER_FILE = 5000


def unified_diff(store: Store, changes: list[Change]) -> str:
    """The change set as git writes a patch: `git apply` and `patch -p1` read it."""
    parts = []
    for change in changes:
        old_path = change.old_path or change.path
        lines = [f"diff --git {quoted('a/', old_path)} {quoted('b/', change.path)}"]
        before, after = change.before, change.after
        if change.kind == "added" and after is not None:
            lines.append(f"new file mode {after.mode:o}")
        elif change.kind == "deleted" and before is not None:
            lines.append(f"deleted file mode {before.mode:o}")
        elif before is not None and after is not None and before.mode != after.mode:
            lines += [f"old mode {before.mode:o}", f"new mode {after.mode:o}"]
        if change.kind == "renamed":
            lines += [f"rename from {quoted('', old_path)}", f"rename to {quoted('', change.path)}"]
        if before is None or after is None or before.digest != after.digest:
            lines += _content_diff(store, change, old_path)
        parts.append("\n".join(lines) + "\n")
    return "".join(parts)


_ESCAPES = {"\n": "\\n", "\t": "\\t", '"': '\\"', "\\": "\\\\"}


def quoted(prefix: str, path: str) -> str:
    """A path as git writes it in a patch: C-quoted when it holds a control character, a
    quote, a backslash or bytes that are not UTF-8, so no name can add lines of its own."""
    if all(c.isprintable() and c not in _ESCAPES for c in path):
        return prefix + path
    out = []
    for char in prefix + path:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        else:
            out.extend(f"\\{b:03o}" for b in char.encode("utf-8", "surrogateescape"))
    return '"' + "".join(out) + '"'


def _content_diff(store: Store, change: Change, old_path: str) -> list[str]:
    old = _text(store, change.before)
    new = _text(store, change.after)
    if old is None or new is None:
        return [f"Binary files {quoted('a/', old_path)} and {quoted('b/', change.path)} differ"]
    a = quoted("a/", old_path) if change.before is not None else "/dev/null"
    b = quoted("b/", change.path) if change.after is not None else "/dev/null"
    out = list(difflib.unified_diff(old, new, a, b, lineterm="", n=3))
    if len(out) > MAX_DIFF_LINES_PER_FILE:
        out = [
            *out[:MAX_DIFF_LINES_PER_FILE],
            f"[... {len(out) - MAX_DIFF_LINES_PER_FILE} more lines]",
        ]
    return out


def _text(store: Store, entry: Entry | None) -> list[str] | None:
    """The lines of a kept text content; [] for none; None for binary or not kept."""
    if entry is None:
        return []
    if not entry.kept:
        return None
    try:
        data = store.read(entry.digest)
    except KeyError:
        return None
    if entry.mode == LINK_MODE:
        return [os.fsdecode(data), "\\ No newline at end of file"]
    if b"\0" in data[:8192]:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    elif lines:
        lines.append("\\ No newline at end of file")
    return lines
