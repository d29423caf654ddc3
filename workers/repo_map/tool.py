"""`find_symbol`: where a name is defined and which files use it, from the repo map; or,
given a few words of what something does, the definitions whose names and docstrings
have them (search.py).

It answers a small model's commonest survey question ("in which file is X defined?",
"which file draws the progress bar?") in one call, where grep takes several and a guess
takes none. It runs in gaffer itself on
the host, as the map is built for the prompt: files are read only as the map reads them
(inside the workspace, never through a link), parsed, never run.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from pydantic import Field

from workers.repo_map.index import RepoMap, build
from workers.repo_map.search import Search, question_words
from workers.tools.base import Args, Tool, ToolContext, ToolError, ToolResult

TOOL_SECONDS = 20.0
"""A call reads new files this long at most (a first call on a huge tree); the rest are
said to be unmapped."""
MAX_DEFINITIONS = 20
MAX_USERS = 15
SUGGESTIONS = 5
ABOUT_FILES = 8
"""Files a search by words answers with, best first."""
MAX_WORDS_CHARS = 200


class FindSymbolArgs(Args):
    name: str = Field(
        description="A class, function, method or constant: `Session`, `turn` or "
        "`Session.turn` (a method by itself or with its class). Or, when you do not know "
        "its name, a few words of what it does: `formatter that writes LaTeX`."
    )


def find_symbol_tool(workspace: Path) -> Tool[FindSymbolArgs]:
    """The tool for one workspace; every call sees the files as they are then (the map's
    cache reads only what changed)."""

    def run(ctx: ToolContext, args: FindSymbolArgs) -> ToolResult:
        name = args.name.strip().strip("`").removesuffix("()")
        if all(part.isidentifier() for part in name.split(".")):
            return found(build(workspace, seconds=TOOL_SECONDS), name)
        if not question_words(name[:MAX_WORDS_CHARS]):
            raise ToolError(
                f"{args.name[:80]!r} is neither a name nor words to search for; give a name "
                "like `Session` or `Session.turn`, or words like `formatter that writes LaTeX`"
            )
        return about(build(workspace, seconds=TOOL_SECONDS), name[:MAX_WORDS_CHARS])

    return Tool(
        name="find_symbol",
        description=(
            "Find where a class, function, method or constant is defined (file and line) and "
            "which files use it, for Python, JavaScript, TypeScript, Go and Rust. One call "
            "answers 'in which file is X defined?'. Given words instead of a name, it lists "
            "the definitions whose names and docstrings have them, best first: one call "
            "answers 'which file draws the progress bar?'. read_file the file for more."
        ),
        args=FindSymbolArgs,
        run=run,
        read_only=True,
        kind="harness",
        origin="harness",
    )


def found(repo: RepoMap, name: str) -> ToolResult:
    """What the map knows of `name`: its definitions, the files that use it, and, when it
    is not defined, names like it and the files the map could not read."""
    definitions = repo.definitions_of(name)
    short = name.rpartition(".")[2]
    users = repo.users_of(short)
    lines: list[str] = []
    if definitions:
        lines.append(f"{name} is defined in:")
        lines += [
            f"  {path}:{s.line} {s.kind} {s.name}" for path, s in definitions[:MAX_DEFINITIONS]
        ]
        if len(definitions) > MAX_DEFINITIONS:
            lines.append(f"  … and {len(definitions) - MAX_DEFINITIONS} more")
    else:
        lines.append(f"No definition of {name} in the {len(repo.files)} files mapped.")
        if close := _close(repo, short):
            lines.append("Defined names like it: " + ", ".join(close))
        if repo.problems:
            unread = "; ".join(repo.problems[:5]) + ("; …" if len(repo.problems) > 5 else "")
            lines.append(f"Not mapped (grep searches them): {unread}")
    if users:
        shown = ", ".join(f"{path} ({count})" for path, count in users[:MAX_USERS])
        more = f", and {len(users) - MAX_USERS} more files" if len(users) > MAX_USERS else ""
        lines.append(
            f"Used in {len(users)} file{'s' if len(users) != 1 else ''}, most first: {shown}{more}"
        )
    elif definitions:
        lines.append("No other use of it in the files mapped.")
    summary = f"{len(definitions)} definition{'s' if len(definitions) != 1 else ''}, {len(users)} files use it"
    return ToolResult(output="\n".join(lines), summary=summary)


def about(repo: RepoMap, words: str) -> ToolResult:
    """The files whose definitions `words` find best, each with the best of them and what
    its docstring says it is; a search that finds nothing says so as find_symbol does."""
    best = Search(repo).best(words, ABOUT_FILES)
    if not best:
        return ToolResult(
            output=f"No definition of anything with the words {words!r} in its name or "
            f"docstring, in the {len(repo.files)} files mapped. Try other words, or grep.",
            summary="nothing found",
        )
    lines = [f"Definitions with the words {words!r} in their names or docstrings, best first:"]
    lines += [f"  {f.path}:{f.symbol.line} {f.symbol.described()}" for f in best]
    lines.append("Only words were matched: read_file the file to see it is the one.")
    return ToolResult(output="\n".join(lines), summary=f"{len(best)} files")


def _close(repo: RepoMap, name: str) -> list[str]:
    names = {s.name.rpartition(".")[2] for found in repo.files.values() for s in found.definitions}
    lowered = {n.lower(): n for n in names}
    exact_case = [lowered[name.lower()]] if name.lower() in lowered else []
    return exact_case + [
        n
        for n in difflib.get_close_matches(name, sorted(names), n=SUGGESTIONS)
        if n not in exact_case
    ]
