"""Files and folders named like a description's words: what a search for a description
('agent loop') is pointed to when nothing matched (grep), and what a reader asked in
words is shown before its first reply (workers/aids/task_files.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from workers.tools.workspace import SKIPPED_DIRS, one_line, relative

# Words too common in questions to say anything about a file's name.
_STOP_WORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "how",
        "what",
        "where",
        "which",
        "who",
        "why",
        "does",
        "from",
        "into",
        "this",
        "that",
        "are",
        "its",
        "file",
        "files",
        "code",
        "folder",
        "folders",
        "project",
        "repository",
        "each",
        "lives",
        "live",
        "used",
        "uses",
        "there",
        "report",
        "answer",
        "part",
    ]
)
MAX_NAME_HINTS = 10


def name_hints(workspace: Path, real: Path, pattern: str) -> str:
    """When nothing matched: files and folders whose names hold a word of the pattern, so
    a search for a description ('agent loop') still leads somewhere (workers/loop.py)."""
    words = name_words(pattern)
    shown = named_like(workspace, real, words)[:MAX_NAME_HINTS]
    if not shown:
        return ""
    return (
        f"\nFiles and folders whose names hold {' or '.join(repr(w) for w in words)}: "
        + ", ".join(shown)
        + "\nRead one of them, or grep for a single word or name that appears in the code."
    )


def name_words(text: str) -> list[str]:
    """The words of a description that a file or folder name might hold, stemmed."""
    return [
        _stem(w.lower())
        for w in re.findall(r"[A-Za-z][a-z]+|[A-Z]{2,}", text)
        if len(w) >= 3 and w.lower() not in _STOP_WORDS
    ]


def named_like(
    workspace: Path, real: Path, words: list[str], *, by_path: bool = False
) -> list[str]:
    """Paths under `real` whose names (`by_path`: whose paths) hold any of `words`: the
    most words first, then the shortest path; folders end in '/'. The walk is bounded
    and skips dot-folders and packaging metadata."""
    if not words or not real.is_dir():
        return []
    scored: list[tuple[int, int, str]] = []
    seen = 0
    for folder, dirs, files in os.walk(real):
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIPPED_DIRS and not d.startswith(".") and not d.endswith(".egg-info")
        )
        for name in [*dirs, *files]:
            if not one_line(name):
                continue
            named = relative(real, Path(folder, name)) if by_path else name
            stem = named.lower().rsplit(".", 1)[0]
            if hits := sum(word in stem for word in words):
                path = relative(workspace, Path(folder, name)) + ("/" if name in dirs else "")
                scored.append((-hits, len(path), path))
        seen += len(dirs) + len(files)
        if seen >= MAX_NAMES_SEEN:
            break
    return [path for _, _, path in sorted(scored)]


MAX_NAMES_SEEN = 20_000


def _stem(word: str) -> str:
    """'sandboxed' and 'sandboxes' find 'sandbox'; 'workers' finds 'worker'."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word
