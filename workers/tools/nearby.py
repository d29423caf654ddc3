"""Where a path that does not exist might be: the files or folders elsewhere in the
workspace with its name. A small model guesses a folder ("supervisor/sandbox_image"
for "sandbox_image") and asks for it again and again, told only "no such folder"; told
where the name is, it goes there. The walk is bounded, never follows a link, and skips
dot-folders and the folders search skips."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from workers.tools.workspace import SKIPPED_DIRS

MAX_SEEN = 5000
"""Entries looked at before giving up: a huge tree costs a bounded walk."""
MAX_SHOWN = 3
MAX_FOUND = 20


def did_you_mean(workspace: Path, path: str, *, folder: bool) -> str:
    """ "; did you mean 'a/b'?" naming where `path`'s last part is, or ""."""
    wanted = PurePosixPath(path.replace("\\", "/"))
    name = wanted.name
    if not name or name in {".", ".."}:
        return ""
    found: list[str] = []
    seen = 0
    for here, dirs, files in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
        for entry in dirs if folder else sorted(files):
            seen += 1
            if entry == name:
                found.append(Path(here, entry).relative_to(workspace).as_posix())
        seen += len(files) if folder else len(dirs)
        if len(found) >= MAX_FOUND or seen >= MAX_SEEN:
            break
    if not found:
        return ""
    # The likeliest first: the most folders in common with the path asked for, then the
    # shallowest ('sandbox_image/README.md' for 'x/sandbox_image/README.md').
    found.sort(key=lambda f: (-_common_tail(PurePosixPath(f), wanted), f.count("/"), f))
    return "; did you mean " + " or ".join(repr(f) for f in found[:MAX_SHOWN]) + "?"


def _common_tail(a: PurePosixPath, b: PurePosixPath) -> int:
    common = 0
    for x, y in zip(reversed(a.parts), reversed(b.parts), strict=False):
        if x != y:
            break
        common += 1
    return common
