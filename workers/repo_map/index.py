"""The workspace's symbols, file by file, read once per file content.

A file is read again only when it changed: each file's size, times and inode are kept
beside the digest of its content, and each content's symbols by that digest, in one
SQLite file in the workspace's state folder (never in the workspace). An unchanged tree
costs a stat per file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import stat
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from workers import state
from workers.repo_map.symbols import (
    MAPPED_SUFFIXES,
    MAX_MAPPED_BYTES,
    FileSymbols,
    Symbol,
    symbols_of,
)
from workers.tools.base import ToolError
from workers.tools.workspace import SKIPPED_DIRS, one_line, read_confined

PROMPT_SECONDS = 5.0
"""What a run's first map may spend reading files it has not read before (a first run on
a huge tree); the next run carries on from the cache."""
EXTRACTOR_VERSION = "3"
"""Part of every content's key: a change to what is extracted reads every file again."""
MAX_MAPPED_FILES = 100_000
"""Past this many source files the rest are left out, and the map says so."""


@dataclass
class RepoMap:
    """Every mapped file's symbols, by its workspace-relative path."""

    files: dict[str, FileSymbols] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    """One line per file left out, or mapped only in part: `path: why`."""

    def definitions_of(self, name: str) -> list[tuple[str, Symbol]]:
        """Where `name` is defined (`Class.method` or its last part, `method`)."""
        return [
            (path, symbol)
            for path, found in sorted(self.files.items())
            for symbol in found.definitions
            if symbol.name == name or symbol.name.rpartition(".")[2] == name
        ]

    def users_of(self, name: str) -> list[tuple[str, int]]:
        """The files that use `name`, and how often, most first."""
        used = [(path, found.references.get(name, 0)) for path, found in self.files.items()]
        return sorted(((p, n) for p, n in used if n), key=lambda pair: (-pair[1], pair[0]))


def build(workspace: Path, *, cached: bool = True, seconds: float | None = None) -> RepoMap:
    """The map of the workspace as it is now; `cached`: files unchanged since the last
    build are not read again (the cache is made when it is missing). Past `seconds`, a
    file not in the cache is left out (and counted): a first build on a huge tree maps
    what it can, and the next one carries on from the cache."""
    deadline = None if seconds is None else time.monotonic() + seconds
    late = 0
    with _Cache.opened(workspace if cached else None) as cache:
        found = RepoMap()
        for count, (rel, info) in enumerate(_source_files(workspace)):
            cache.seen.add(rel)
            if count >= MAX_MAPPED_FILES:
                found.problems.append(
                    f"…: more than {MAX_MAPPED_FILES} source files; the rest are not mapped"
                )
                break
            if not _plain_name(rel):
                found.problems.append(
                    f"{rel!r}: not mapped (a name the prompt cannot show as it is)"
                )
                continue
            late_now = deadline is not None and time.monotonic() > deadline
            symbols = _symbols(workspace, rel, info, cache, read=not late_now)
            if symbols is None:
                late += late_now
                continue
            if symbols.problem:
                found.problems.append(f"{rel}: {symbols.problem}")
            if symbols.definitions or symbols.references:
                found.files[rel] = symbols
        if late:
            found.problems.append(f"…: {late} files not read in time; the next run maps them")
        return found


def _source_files(workspace: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Each source file's workspace-relative path and its own stat (a link is never
    followed, nor a hidden or skipped folder entered), folder by folder in name order."""
    folders = [""]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(os.path.join(workspace, folder)) as found:
                entries = sorted(found, key=lambda e: e.name)
        except OSError:
            continue
        below = []
        for entry in entries:
            rel = f"{folder}/{entry.name}" if folder else entry.name
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIPPED_DIRS:
                    below.append(rel)
            elif os.path.splitext(entry.name)[1] in MAPPED_SUFFIXES:
                with contextlib.suppress(OSError):
                    info = entry.stat(follow_symlinks=False)
                    if stat.S_ISREG(info.st_mode):
                        yield rel, info
        folders.extend(reversed(below))


def _symbols(
    workspace: Path, rel: str, info: os.stat_result, cache: _Cache, *, read: bool = True
) -> FileSymbols | None:
    """The file's symbols, from the cache when it has not changed; None when it is gone,
    cannot be read (a link swapped in, a hard link), or is not cached and not to be
    `read`."""
    if info.st_size > MAX_MAPPED_BYTES:  # said only of a file inside (a folder swapped for a link)
        try:
            read_confined(workspace, rel, 0)
        except (OSError, ToolError):
            return None
        return FileSymbols(problem=f"too large to map ({info.st_size / 1024 / 1024:.1f} MB)")
    stamp = (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
    if (known := cache.known(rel, stamp)) is not None:
        return known
    if not read:
        return None
    try:
        data = read_confined(workspace, rel, MAX_MAPPED_BYTES)
    except (OSError, ToolError):
        return None
    if data is None:
        return None
    digest = hashlib.sha256(EXTRACTOR_VERSION.encode() + b"\0" + data).hexdigest()
    symbols = cache.symbols(digest)
    if symbols is None:
        symbols = symbols_of(rel, data)
        cache.keep_symbols(digest, symbols)
    cache.keep_stamp(rel, stamp, digest)
    return symbols


# The symbols read from the cache, by content digest, kept in this process: a run builds
# the map for the prompt, then again for each find_symbol call.
_PARSED: dict[str, FileSymbols] = {}
MAX_PARSED = 200_000


def forget_parsed() -> None:
    """As a new process starts: no symbols parsed yet (for benchmarks)."""
    _PARSED.clear()


def _connected(workspace: Path) -> sqlite3.Connection | None:
    """The workspace's cache file, opened and checked; a damaged one is made anew (it is
    only a cache), and one that cannot be is done without."""
    try:
        path = state.workspace_dir(workspace, "repo_map") / "map.sqlite"
    except OSError:
        return None
    for attempt in range(2):
        db = None
        try:
            db = sqlite3.connect(path, timeout=10)
            db.executescript(
                "CREATE TABLE IF NOT EXISTS stamps (path TEXT PRIMARY KEY, size INTEGER, "
                "mtime INTEGER, ctime INTEGER, ino INTEGER, digest TEXT);"
                "CREATE TABLE IF NOT EXISTS symbols (digest TEXT PRIMARY KEY, data TEXT);"
            )
            db.execute("SELECT count(*) FROM stamps").fetchone()
            return db
        except sqlite3.DatabaseError:
            if db is not None:
                db.close()
            if attempt == 0:
                with contextlib.suppress(OSError):
                    path.unlink()
        except (OSError, sqlite3.Error):
            break
    return None


class _Cache:
    """The SQLite file of one workspace's map; with no file (`workspace` None, or one
    that cannot be opened), it keeps nothing and every file is read."""

    def __init__(self, db: sqlite3.Connection | None) -> None:
        self.db = db
        self.stamps: dict[str, tuple[tuple[int, int, int, int], str]] = {}
        if db is not None:
            rows = db.execute("SELECT path, size, mtime, ctime, ino, digest FROM stamps")
            self.stamps = {row[0]: ((row[1], row[2], row[3], row[4]), row[5]) for row in rows}
        self.new_stamps: list[tuple[str, int, int, int, int, str]] = []
        self.new_symbols: dict[str, str] = {}
        self.kept: dict[str, str] | None = None
        """The cache's symbols by digest, as stored; read when first needed."""
        self.seen: set[str] = set()
        """The paths this build looked at: the others' stamps go."""

    @classmethod
    @contextlib.contextmanager
    def opened(cls, workspace: Path | None) -> Iterator[_Cache]:
        db = _connected(workspace) if workspace is not None else None
        try:
            cache = cls(db)
        except sqlite3.Error:  # unreadable after all: this build keeps nothing
            cache = cls(None)
        try:
            yield cache
            cache._save()
        finally:
            if db is not None:
                db.close()

    def known(self, rel: str, stamp: tuple[int, int, int, int]) -> FileSymbols | None:
        kept = self.stamps.get(rel)
        if kept is None or kept[0] != stamp:
            return None
        return self.symbols(kept[1])

    def symbols(self, digest: str) -> FileSymbols | None:
        if self.db is None:
            return None
        if (parsed := _PARSED.get(digest)) is not None:
            return parsed
        if self.kept is None:  # every row in one query: far cheaper than one per file
            self.kept = dict(self.db.execute("SELECT digest, data FROM symbols"))
        data = self.new_symbols.get(digest) or self.kept.get(digest)
        if data is None:
            return None
        try:
            parsed = FileSymbols.from_json(json.loads(data))
        except (ValueError, KeyError, TypeError):
            return None  # a damaged entry: the file is read again
        if len(_PARSED) < MAX_PARSED:
            _PARSED[digest] = parsed
        return parsed

    def keep_symbols(self, digest: str, symbols: FileSymbols) -> None:
        self.new_symbols[digest] = json.dumps(symbols.as_json())

    def keep_stamp(self, rel: str, stamp: tuple[int, int, int, int], digest: str) -> None:
        self.new_stamps.append((rel, *stamp, digest))

    def _save(self) -> None:
        gone = [(path,) for path in self.stamps if path not in self.seen]
        if self.db is None or not (self.new_stamps or self.new_symbols or gone):
            return
        with contextlib.suppress(sqlite3.Error), self.db:
            self.db.executemany("DELETE FROM stamps WHERE path = ?", gone)
            self.db.executemany(
                "INSERT OR REPLACE INTO symbols (digest, data) VALUES (?, ?)",
                self.new_symbols.items(),
            )
            self.db.executemany(
                "INSERT OR REPLACE INTO stamps (path, size, mtime, ctime, ino, digest) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                self.new_stamps,
            )
            if gone:  # what no file holds any more
                self.db.execute(
                    "DELETE FROM symbols WHERE digest NOT IN (SELECT digest FROM stamps)"
                )


def _plain_name(rel: str) -> bool:
    """A path the map may show and store: UTF-8, with no control, format or line-breaking
    characters (U+2028, U+202E), which would read as lines of the prompt or reorder it."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:  # a name that is not UTF-8, as os gives it back
        return False
    hidden = any(unicodedata.category(c) in _HIDDEN for c in rel)
    return one_line(rel) and not hidden and "`" not in rel  # the map shows it in backticks


_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp"})
