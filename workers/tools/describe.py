"""What a file or folder is, in a line: its name and size, and what its own first lines
say it is; and the whole workspace at a glance, for every agent's system prompt."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from workers.tools.base import ToolError
from workers.tools.workspace import SKIPPED_DIRS, one_line, read_confined, relative

# What an agent is shown of the workspace before it starts: enough to name real folders,
# what each says it is for, and their files; little enough (about 500 tokens) to cost a
# small model seconds, not minutes.
GLANCE_TOP = 40


GLANCE_PER_FOLDER = 10


GLANCE_CHARS = 2000


def started_in(workspace: Path) -> str:
    """Where in the workspace the user started gaffer, when not at its top: what they
    call `tests/` may be relative to there."""
    here, root = Path.cwd().resolve(), Path(os.path.realpath(workspace))
    if here == root or root not in here.parents:
        return ""
    rel = here.relative_to(root).as_posix()
    return f"\nThe user started gaffer in {rel}/ (paths they give may be relative to it)."


def workspace_glance(workspace: Path) -> str:
    """The top level of the workspace and what each top-level folder holds, by name only:
    a model that sees the real layout does not invent one."""
    root = Path(os.path.realpath(workspace))

    def names(folder: Path, cap: int) -> list[str]:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: (not e.is_dir(), e.name))
        except OSError:
            return []
        shown = [
            e.name + ("/" if e.is_dir(follow_symlinks=False) else "")
            for e in entries
            if e.name not in SKIPPED_DIRS
            and one_line(e.name)
            and not e.name.endswith(".egg-info")
            and not (e.name.startswith(".") and e.is_dir())
        ]
        more = len(shown) - cap
        return shown[:cap] + ([f"… {more} more"] if more > 0 else [])

    top = names(root, GLANCE_TOP)
    lines = ["Top level: " + ", ".join(top)]
    for name in top:
        if name.endswith("/"):
            inside = names(root / name, GLANCE_PER_FOLDER)
            said = folder_line(root, name.rstrip("/"))
            lines.append(
                f"{name} " + (f"({said}) " if said else "") + (", ".join(inside) or "(empty)")
            )
    text = "\n".join(lines)
    return text if len(text) <= GLANCE_CHARS else text[: GLANCE_CHARS - 1] + "…"


MAX_DESCRIBED = 60


SUMMARY_CHARS = 90


HEAD_BYTES = 4096
# Where a folder says what it is for, in the order looked at.
FOLDER_DESCRIPTIONS = ("__init__.py", "README.md", "README.rst", "README.txt", "README")


_DOCSTRING = re.compile(
    r'^(?:#[^\n]*\n|\s*\n|from __future__[^\n]*\n)*\s*[rRbBuU]?("""|\'\'\')\s*([^\n]*)'
)


_TOML_DESCRIPTION = re.compile(r'^description\s*=\s*"([^"]*)"', re.MULTILINE)


def first_line(entry: os.DirEntry[str]) -> str:
    """A file's own one-line description: a module docstring's first line, a document's
    first heading, a script's first comment, a profile's description; '' when none."""
    if not entry.is_file(follow_symlinks=False):
        return ""
    try:
        with open(entry.path, "rb") as f:
            head = f.read(HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""
    return summary(entry.name, head)


def summary(name: str, head: str) -> str:
    """The one-line description in the first lines of a file called `name`; '' when none."""
    line = ""
    if name.endswith(".py"):
        match = _DOCSTRING.match(head)
        line = match.group(2) if match else ""
    elif name.endswith((".md", ".rst", ".txt")) or name == "README":
        line = next((t.lstrip("# ") for t in head.splitlines() if t.strip()), "")
    elif name.endswith(".toml"):
        match = _TOML_DESCRIPTION.search(head)
        line = match.group(1) if match else ""
    elif name.endswith(".sh") or name in ("Dockerfile", "Makefile"):
        line = next(
            (
                t.lstrip("# ")
                for t in head.splitlines()
                if t.startswith("#") and not t.startswith("#!")
            ),
            "",
        )
    line = " ".join(line.strip().strip('"').split())
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1] + "…"


def folder_line(workspace: Path, folder: str) -> str:
    """What a folder says it is: its package docstring or its README's first heading,
    read without following a link; '' when it says nothing."""
    if os.path.islink(os.path.join(workspace, folder)):
        return ""
    for name in FOLDER_DESCRIPTIONS:
        if os.path.islink(os.path.join(workspace, folder, name)):
            continue  # even to a file inside: it could be a secret's first line
        try:
            data = read_confined(workspace, f"{folder}/{name}", HEAD_BYTES)
        except ToolError:
            continue
        if data and (line := summary(name, data[:HEAD_BYTES].decode("utf-8", errors="replace"))):
            return line
    return ""


def describe(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return f"{entry.name} -> {os.readlink(entry.path)}  (symlink)"
    if entry.is_dir():
        return f"{entry.name}/"
    mode = entry.stat().st_mode
    if not stat.S_ISREG(mode):
        return f"{entry.name}  (special file)"
    return f"{entry.name}  {size(entry.stat().st_size)}"


def size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def said_of(workspace: Path, entry: os.DirEntry[str]) -> str:
    """An entry's own one-line description: a folder's (folder_line), a file's (first_line)."""
    if entry.is_dir(follow_symlinks=False):
        return folder_line(workspace, relative(workspace, Path(entry.path)))
    return first_line(entry)
