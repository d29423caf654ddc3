"""The file tools: read, write, edit and list, each confined to the workspace."""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from pydantic import AliasChoices, Field

from workers.facts import Facts
from workers.tools import outputs
from workers.tools.base import Args, Tool, ToolContext, ToolError, ToolResult
from workers.tools.describe import MAX_DESCRIBED, describe, said_of
from workers.tools.nearby import (
    did_you_mean,
    folder_or_file_named,
    instead,
    moved,
    text_elsewhere,
)
from workers.tools.workspace import (
    SKIPPED_DIRS,
    open_confined,
    read_all,
    relative,
    resolve,
    resolve_for_write,
    write_confined,
)

# One read must fit comfortably in a small model's context next to the conversation.
MAX_READ_LINES = 2000
MAX_READ_BYTES = 50 * 1024
# Room kept for the notes that end a read ("showing lines …; call read_file with offset …").
NOTES_ROOM = 300
# Counting lines of a huge file for the "of N" note is not worth the wait.
MAX_COUNTED_BYTES = 50 * 1024 * 1024
# A sniff this long finds the NUL bytes that mark almost every binary format.
BINARY_SNIFF_BYTES = 8192
MAX_LIST_ENTRIES = 500
MAX_LISTED_CHARS = 40_000
# An edit holds the whole file in memory twice; past this, a command does it better.
MAX_EDITED_BYTES = 20 * 1024 * 1024


def looks_binary(path: Path) -> bool:
    with path.open("rb") as f:
        return sniff_binary(f)


def sniff_binary(f: BinaryIO) -> bool:
    """True for a file with a NUL byte near its start; the file is rewound."""
    binary = b"\x00" in f.read(BINARY_SNIFF_BYTES)
    f.seek(0)
    return binary


def _existing_file(ctx: ToolContext, path: str, *, from_above: bool = True) -> Path:
    real = resolve(ctx.workspace, path, from_above=from_above)
    if not real.exists():
        elsewhere = did_you_mean(ctx.workspace, path, folder=False)
        raise ToolError(
            f"no such file: {path!r}"
            + (elsewhere or "; use list_dir or find_files to find the right path")
        )
    if real.is_dir():
        raise ToolError(f"{path!r} is a directory; use list_dir to see what it holds")
    return real


_LINE = AliasChoices("offset", "line", "start_line")


class ReadFileArgs(Args):
    path: str = Field(description="File path relative to the workspace root.")
    offset: int | None = Field(  # also as small models name it, shown "a.py:213 class A"
        None, ge=1, description="First line to show, 1-based. Default 1.", validation_alias=_LINE
    )
    limit: int | None = Field(
        None,
        ge=1,
        le=MAX_READ_LINES,
        description=f"Most lines to show. Default and max {MAX_READ_LINES}.",
    )


def read_file(ctx: ToolContext, args: ReadFileArgs) -> ToolResult:
    where = outputs.folder(ctx) if os.path.isabs(args.path.strip()) else None
    if where is not None and (name := outputs.saved_name(where, args.path)) is not None:
        fd = outputs.open_saved(where, name)  # a command's saved output, outside the workspace
        with os.fdopen(fd, "rb") as f:
            return _read_lines(f, args, ctx.output_cap(MAX_READ_BYTES) - NOTES_ROOM)
    if real_path := moved(ctx.workspace, args.path, folder=False):
        shown = read_file(ctx, args.model_copy(update={"path": real_path}))
        return dataclasses.replace(shown, output=instead(args.path, real_path) + shown.output)
    real = _existing_file(ctx, args.path)
    with open_confined(ctx.workspace, real) as fd, os.fdopen(fd, "rb", closefd=False) as f:
        return _read_lines(f, args, ctx.output_cap(MAX_READ_BYTES) - NOTES_ROOM)


def _read_lines(f: BinaryIO, args: ReadFileArgs, max_bytes: int) -> ToolResult:
    size_on_disk = os.fstat(f.fileno()).st_size
    if sniff_binary(f):
        raise ToolError(f"{args.path!r} is a binary file ({size_on_disk} bytes); not shown")
    first = args.offset or 1
    limit = args.limit or MAX_READ_LINES
    lines: list[str] = []
    size, replaced, cut_line, line_no = 0, False, False, 0
    for line_no, (raw, too_long) in enumerate(_raw_lines(f), start=1):
        if line_no < first:
            continue
        if len(lines) >= limit or (lines and size + len(raw) > max_bytes):
            break
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text, replaced = raw.decode("utf-8", errors="replace"), True
        if size + len(raw) > max_bytes:  # one line longer than the whole budget
            text, too_long = raw[:max_bytes].decode("utf-8", errors="replace"), True
        lines.append(text)
        size += len(raw)
        if too_long:
            cut_line = True
            break
    if not lines:
        if first == 1:
            return ToolResult(output="(empty file)", summary="empty file")
        raise ToolError(f"offset {first} is past the end of {args.path!r} ({line_no} lines)")
    last = first + len(lines) - 1
    total = _count_lines(f, size_on_disk)
    body = "".join(lines)
    notes = []
    if cut_line:
        notes.append(f"line {first + len(lines) - 1} is longer than {max_bytes} bytes and was cut")
    if replaced:
        notes.append("the file is not valid UTF-8; undecodable bytes are shown as �")
    of_total = f" of {total}" if total is not None else ""
    more = total is None or last < total
    if more or first > 1 or notes:
        shown = f"showing lines {first}-{last}{of_total}"
        if more:
            shown += f"; call read_file with offset={last + 1} to continue"
        notes.insert(0, shown)
    if notes:
        body = body.rstrip("\n") + "\n\n[" + "; ".join(notes) + "]"
    return ToolResult(output=body, summary=f"lines {first}-{last}{of_total}")


def _raw_lines(f: BinaryIO) -> Iterator[tuple[bytes, bool]]:
    """Lines as bytes, each at most MAX_READ_BYTES; True marks a line that was cut.

    Reading by bounded chunks keeps a 1 GB file without newlines from entering memory.
    """
    while raw := f.readline(MAX_READ_BYTES + 1):
        if len(raw) > MAX_READ_BYTES and not raw.endswith(b"\n"):
            while (rest := f.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield raw[:MAX_READ_BYTES], True
        else:
            yield raw, False


def _count_lines(f: BinaryIO, size: int) -> int | None:
    if size > MAX_COUNTED_BYTES:
        return None
    f.seek(0)
    count, last = 0, b"\n"
    while chunk := f.read(1 << 20):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (0 if last == b"\n" else 1)


class WriteFileArgs(Args):
    path: str = Field(description="File path relative to the workspace root.")
    content: str = Field(description="The whole new content of the file.")


def write_file(ctx: ToolContext, args: WriteFileArgs) -> ToolResult:
    real = resolve_for_write(ctx.workspace, args.path)
    if real.is_dir():
        raise ToolError(f"{args.path!r} is a directory; give a file path")
    existed = os.path.lexists(real)
    real.parent.mkdir(parents=True, exist_ok=True)
    data = args.content.encode("utf-8")
    write_confined(ctx.workspace, real, data)
    what = "replaced the existing file" if existed else "created it"
    rel = relative(ctx.workspace, real)
    return ToolResult(
        output=f"wrote {len(data)} bytes to {rel} ({what})",
        summary=f"{len(data)} bytes ({'replaced' if existed else 'new file'})",
        facts=Facts(modified=(rel,)),
    )


class EditFileArgs(Args):
    path: str = Field(description="File path relative to the workspace root.")
    old_text: str = Field(description="Exact text to replace; must occur exactly once in the file.")
    new_text: str = Field(description="Text to put in its place.")


def edit_file(ctx: ToolContext, args: EditFileArgs) -> ToolResult:
    _existing_file(ctx, args.path, from_above=False)
    real = resolve_for_write(ctx.workspace, args.path)
    if not args.old_text:
        raise ToolError(
            "old_text is empty; give the exact text to replace (use write_file for a new file)"
        )
    if args.old_text == args.new_text:
        raise ToolError("old_text and new_text are the same; nothing to change")
    with open_confined(ctx.workspace, real) as fd:
        data = read_all(fd, MAX_EDITED_BYTES + 1)
    if len(data) > MAX_EDITED_BYTES:
        raise ToolError(
            f"{args.path!r} is over {MAX_EDITED_BYTES // (1024 * 1024)} MB; edit it with a command instead"
        )
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise ToolError(f"{args.path!r} is a binary file; it cannot be edited as text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ToolError(f"{args.path!r} is not valid UTF-8; editing it could corrupt it") from error
    old, new = args.old_text, args.new_text
    # Models write "\n"; files from Windows checkouts keep "\r\n". Match either way.
    crlf = "\r\n" in text and "\r\n" not in old
    if crlf:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old_text was not found in {args.path!r}; nothing written. "
            + (text_elsewhere(ctx.workspace, real, args.old_text) or _nearest(text, args.old_text))
        )
    if count > 1:
        lines = _match_lines(text, old)
        raise ToolError(
            f"old_text matches {count} places in {args.path!r} (lines {', '.join(map(str, lines))}); "
            "nothing written. Include more surrounding lines so it matches exactly one place."
        )
    start = text.index(old)
    write_confined(ctx.workspace, real, text.replace(old, new, 1).encode("utf-8"))
    line = text.count("\n", 0, start) + 1
    rel = relative(ctx.workspace, real)
    return ToolResult(
        output=f"edited {rel}: replaced 1 match at line {line} "
        f"({old.count(chr(10)) + 1} lines → {new.count(chr(10)) + 1} lines)",
        summary="replaced 1 match",
        facts=Facts(modified=(rel,)),
    )


def _match_lines(text: str, old: str) -> list[int]:
    lines, start = [], text.find(old)
    while start != -1:
        lines.append(text.count("\n", 0, start) + 1)
        start = text.find(old, start + len(old))
    return lines


def _nearest(text: str, old: str) -> str:
    """The file's lines most like old_text's first line, so the model can copy them exactly."""
    wanted = next((line.strip() for line in old.splitlines() if line.strip()), "")
    lines = text.splitlines()
    scored = sorted(
        (
            (difflib.SequenceMatcher(None, wanted, line.strip()).ratio(), n)
            for n, line in enumerate(lines, 1)
        ),
        reverse=True,
    )
    close = [(score, n) for score, n in scored[:3] if score >= 0.5]
    if not close:
        return "No line resembles it; read_file the file and copy the text exactly."
    shown = "\n".join(f"  line {n}: {lines[n - 1]}" for _, n in sorted(close, key=lambda c: c[1]))
    return f"The nearest lines are:\n{shown}\nCopy the text exactly, including whitespace."


class ListDirArgs(Args):
    path: str = Field(".", description="Folder path relative to the workspace root.")


def list_dir(ctx: ToolContext, args: ListDirArgs) -> ToolResult:
    if real_path := moved(ctx.workspace, args.path, folder=True):
        listed = list_dir(ctx, args.model_copy(update={"path": real_path}))
        return dataclasses.replace(listed, output=instead(args.path, real_path) + listed.output)
    real = resolve(ctx.workspace, args.path)
    if not real.exists():
        raise ToolError(
            f"no such folder: {args.path!r}" + folder_or_file_named(ctx.workspace, args.path)
        )
    if not real.is_dir():
        raise ToolError(f"{args.path!r} is a file; use read_file to read it")
    skipped, entries = [], []
    with os.scandir(real) as it:
        for entry in it:
            if entry.name in SKIPPED_DIRS and entry.is_dir(follow_symlinks=False):
                skipped.append(entry.name)
                continue
            entries.append(entry)
    entries.sort(key=lambda e: (not e.is_dir(follow_symlinks=False), e.name))
    shown: list[str] = []
    used, budget = 0, ctx.output_cap(MAX_LISTED_CHARS) - 200
    # A folder small enough gets each entry's own one-line description (a file's
    # docstring or heading, a subfolder's package docstring or README): what a newcomer
    # reads first, and what spares a model opening every file to learn what it is for.
    described = len(entries) <= MAX_DESCRIBED
    for entry in entries[:MAX_LIST_ENTRIES]:
        line = describe(entry)
        if described and (summary := said_of(ctx.workspace, entry)):
            line += f"  — {summary}"
        if used + len(line) + 1 > budget:
            break
        shown.append(line)
        used += len(line) + 1
    notes = []
    if len(entries) > len(shown):
        notes.append(
            f"{len(entries) - len(shown)} more entries not shown; use find_files to narrow"
        )
    if skipped:
        notes.append("skipped: " + ", ".join(sorted(skipped)))
    body = "\n".join(shown) if shown else "(empty folder)"
    if notes:
        body += "\n[" + "; ".join(notes) + "]"
    return ToolResult(
        output=body, summary=f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
    )


READ_FILE = Tool(
    name="read_file",
    description=(
        f"Read a text file in the workspace. Shows at most {MAX_READ_LINES} lines or "
        f"{MAX_READ_BYTES // 1024} KB per call; a note at the end says how to continue with offset. "
        "Binary files are refused."
    ),
    args=ReadFileArgs,
    run=read_file,
    read_only=True,
)
WRITE_FILE = Tool(
    name="write_file",
    description=(
        "Create or overwrite a file with the given content; parent folders are created. "
        "For a change to part of an existing file, prefer edit_file."
    ),
    args=WriteFileArgs,
    run=write_file,
    read_only=False,
)
EDIT_FILE = Tool(
    name="edit_file",
    description=(
        "Replace one exact piece of text in a file. old_text must match exactly one place, "
        "whitespace included; copy it from read_file output. If it matches zero or several "
        "places nothing is written and the error says where to look."
    ),
    args=EditFileArgs,
    run=edit_file,
    read_only=False,
)
LIST_DIR = Tool(
    name="list_dir",
    description=(
        "List a folder: sub-folders end with '/', files show their size. "
        "Tool folders such as .git, .venv and node_modules are skipped."
    ),
    args=ListDirArgs,
    run=list_dir,
    read_only=True,
)
