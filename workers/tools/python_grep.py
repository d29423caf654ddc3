"""grep without ripgrep: Python's `re` in a process of its own, so a pattern that
backtracks for ever is killed at the search's deadline instead of hanging the agent.

Run as `python -m workers.tools.python_grep ROOT PATH PATTERN [GLOB]`; it writes one
match per line (`path:line:text`), and `SKIPPED<TAB>path` for a file too large to search.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

from workers.tools.files import looks_binary
from workers.tools.workspace import SKIPPED_DIRS, relative

MAX_SEARCHED_FILE_BYTES = 10 * 1024 * 1024
SKIPPED = "SKIPPED\t"


def walk_files(real: Path, *, hidden: bool = True) -> Iterator[Path]:
    """Regular files under `real`, sorted, never following symlinks (they may point out);
    `hidden=False` leaves out dot-files and does not go into dot-folders."""
    if real.is_file():
        yield real
        return
    for folder, dirs, files in os.walk(real):
        dirs[:] = sorted(
            d for d in dirs if d not in SKIPPED_DIRS and (hidden or not d.startswith("."))
        )
        for name in sorted(files):
            path = Path(folder, name)
            if (hidden or not name.startswith(".")) and not path.is_symlink() and path.is_file():
                yield path


def search(workspace: Path, real: Path, pattern: str, glob: str | None) -> None:
    regex = re.compile(pattern)
    out = sys.stdout.buffer  # bytes: a file name that is not UTF-8 goes out as it is
    for path in walk_files(real):
        if glob and not fnmatch(path.name, glob):
            continue
        name = os.fsencode(relative(workspace, path))
        try:
            if path.stat().st_size > MAX_SEARCHED_FILE_BYTES:
                out.write(SKIPPED.encode() + name + b"\n")
                continue
            if looks_binary(path):
                continue
            with path.open(encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, start=1):
                    if regex.search(line):
                        text = line.rstrip("\n").encode("utf-8", "replace")
                        out.write(name + f":{number}:".encode() + text + b"\n")
                        out.flush()
        except OSError:
            continue


if __name__ == "__main__":
    root, target, expression = sys.argv[1:4]
    search(Path(root), Path(target), expression, sys.argv[4] if len(sys.argv) > 4 else None)
