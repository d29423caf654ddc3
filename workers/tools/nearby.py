"""Where a path that does not exist might be: the files or folders elsewhere in the
workspace with its name. A small model guesses a folder ("supervisor/sandbox_image"
for "sandbox_image") and asks for it again and again, told only "no such folder"; told
where the name is, it goes there. The walk is bounded, never follows a link, and skips
dot-folders and the folders search skips. And where an edit's old text is, when it is
not in the file named (text_elsewhere)."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from workers.tools.base import ToolError
from workers.tools.workspace import SKIPPED_DIRS, relative, resolve

MAX_SEEN = 5000
"""Entries looked at before giving up: a huge tree costs a bounded walk."""
MAX_SHOWN = 3
MAX_FOUND = 20


def did_you_mean(workspace: Path, path: str, *, folder: bool) -> str:
    """ "; did you mean 'a/b'?" naming where `path`'s last part is, or "". A file's name
    with no suffix is also a module's (`core` for core.py): a small model names a module
    as Python imports it, and on the bench's click one made thirteen calls so, each told
    only "no such file or folder: 'core'"."""
    wanted = PurePosixPath(path.replace("\\", "/"))
    name = wanted.name
    if not name or name in {".", ".."}:
        return ""
    module = not folder and "." not in name
    found: list[str] = []
    seen = 0
    for here, dirs, files in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
        for entry in dirs if folder else sorted(files):
            seen += 1
            if entry == name or (module and entry.split(".", 1)[0] == name):
                found.append(Path(here, entry).relative_to(workspace).as_posix())
        seen += len(files) if folder else len(dirs)
        if len(found) >= MAX_FOUND or seen >= MAX_SEEN:
            break
    if not found:
        return ""
    # One in the folder asked for first, then one of the very name, then the shallowest.
    # (One with the folders asked for, under another, is shown by under_another_folder.)
    asked = wanted.parent.as_posix().strip("/")
    found.sort(
        key=lambda f: (
            PurePosixPath(f).parent.as_posix().strip(".") != asked.strip("."),
            PurePosixPath(f).name != name,
            f.count("/"),
            f,
        )
    )
    return "; did you mean " + " or ".join(repr(f) for f in found[:MAX_SHOWN]) + "?"


def folder_or_file_named(workspace: Path, path: str) -> str:
    """did_you_mean for a folder of `path`'s name, else for a file (`core` in a grep's
    or a listing's path, where core.py is)."""
    return did_you_mean(workspace, path, folder=True) or did_you_mean(workspace, path, folder=False)


def under_another_folder(workspace: Path, path: str, *, folder: bool) -> str | None:
    """The path that is there when `path`'s leading folders are dropped, keeping a folder
    and the name of a file ('sandbox_image/Dockerfile' for 'supervisor/sandbox_image/
    Dockerfile'; a folder's own name is enough), or None. A model that put a folder it invented in front of a real path is shown the
    real one at once, told so, where "did you mean" cost it a whole reply each time."""
    parts = PurePosixPath(path.replace("\\", "/")).parts
    if not parts or parts[0] == "/" or ".." in parts:
        return None
    for start in range(1, len(parts) if folder else len(parts) - 1):
        shorter = "/".join(parts[start:])
        try:
            real = resolve(workspace, shorter)
        except ToolError:
            continue
        if real.is_dir() if folder else real.is_file():
            return shorter
    return None


def moved(workspace: Path, path: str, *, folder: bool) -> str | None:
    """Where a path that is not there is, under fewer folders (for reading only)."""
    if resolve(workspace, path).exists():
        return None
    return under_another_folder(workspace, path, folder=folder)


def instead(asked: str, shown: str) -> str:
    """The note before what is shown in place of a path that is not there."""
    return f"[there is no {asked!r}; this is {shown!r}]\n"


_GLOB_CHARS = frozenset("*?[")


def as_pattern(path: str) -> tuple[str, str | None] | None:
    """A path written as a pattern (`*`, `*.py`, `src/**/*.py`), as the folder before
    its first wildcard and the pattern of its last part ('*' or '**' alone: none); None
    for a path with no wildcard. A small model searching "everywhere" writes `*` for the
    path (the bench's pygments reader, three greps and a circle)."""
    parts = path.replace("\\", "/").split("/")
    if not any(_GLOB_CHARS & set(part) for part in parts):
        return None
    first = next(i for i, part in enumerate(parts) if _GLOB_CHARS & set(part))
    folder = "/".join(parts[:first]) or "."
    last = parts[-1] if first == len(parts) - 1 or not _GLOB_CHARS.isdisjoint(parts[-1]) else ""
    return folder, (None if last in ("", "*", "**") else last)


def as_pattern_note(path: str, folder: str, glob: str | None) -> str:
    """The note before what a path written as a pattern shows."""
    matching = f", files matching {glob!r}" if glob else ""
    return f"[{path!r} is a pattern, not a path: this is {folder!r}{matching}]\n"


# Files looked through for an old_text that is not where the model said: the folder of
# the file named, where a mix-up (the test file for the module) almost always lies.
MAX_SEARCHED_SIBLINGS = 50
MAX_SIBLING_BYTES = 200 * 1024


def text_elsewhere(workspace: Path, real: Path, old_text: str) -> str:
    """Where an old_text that is not in the file named does occur: a small model copies
    it from the wrong file (the test it read, instead of the module to change)."""
    needle = old_text.strip()
    if not needle:
        return ""
    try:
        siblings = sorted(p for p in real.parent.iterdir() if p.is_file() and p != real)
    except OSError:
        return ""
    for path in siblings[:MAX_SEARCHED_SIBLINGS]:
        try:
            if path.is_symlink() or path.stat().st_size > MAX_SIBLING_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if needle in text:
            line = text.count("\n", 0, text.index(needle)) + 1
            rel = relative(workspace, path)
            return (
                f"That text is in {rel} (line {line}), not in {relative(workspace, real)}: "
                "make sure you are changing the right file (tests say what the code must do; "
                "change the code, not the tests)."
            )
    return ""
