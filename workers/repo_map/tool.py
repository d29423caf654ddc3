"""`find_symbol`: where a name is defined and which files use it, from the repo map.

It answers a small model's commonest survey question ("in which file is X defined?") in
one call, where grep takes several and a guess takes none. It runs in gaffer itself on
the host, as the map is built for the prompt: files are read only as the map reads them
(inside the workspace, never through a link), parsed, never run.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from pydantic import Field

from workers.repo_map.index import RepoMap, build
from workers.tools.base import Args, Tool, ToolContext, ToolError, ToolResult

TOOL_SECONDS = 20.0
"""A call reads new files this long at most (a first call on a huge tree); the rest are
said to be unmapped."""
MAX_DEFINITIONS = 20
MAX_USERS = 15
SUGGESTIONS = 5


class FindSymbolArgs(Args):
    name: str = Field(
        description="A class, function, method or constant: `Session`, `turn` or "
        "`Session.turn` (a method by itself or with its class)."
    )


def find_symbol_tool(workspace: Path) -> Tool[FindSymbolArgs]:
    """The tool for one workspace; every call sees the files as they are then (the map's
    cache reads only what changed)."""

    def run(ctx: ToolContext, args: FindSymbolArgs) -> ToolResult:
        name = args.name.strip().strip("`").removesuffix("()")
        if not name or not name.replace(".", "").replace("_", "").isalnum():
            raise ToolError(
                f"{args.name!r} is not a name; give one like `Session` or `Session.turn`"
            )
        return found(build(workspace, seconds=TOOL_SECONDS), name)

    return Tool(
        name="find_symbol",
        description=(
            "Find where a class, function, method or constant is defined (file and line) and "
            "which files use it, for Python, JavaScript, TypeScript, Go and Rust. One call "
            "answers 'in which file is X defined?'; read_file the file it names for more."
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


def _close(repo: RepoMap, name: str) -> list[str]:
    names = {s.name.rpartition(".")[2] for found in repo.files.values() for s in found.definitions}
    lowered = {n.lower(): n for n in names}
    exact_case = [lowered[name.lower()]] if name.lower() in lowered else []
    return exact_case + [
        n
        for n in difflib.get_close_matches(name, sorted(names), n=SUGGESTIONS)
        if n not in exact_case
    ]
