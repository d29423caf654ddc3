"""Project memory: `remember` appends to AGENT.md; AGENT.md and AGENTS.md are read at start."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from workers.facts import Facts
from workers.tools.base import Args, Tool, ToolContext, ToolError, ToolResult
from workers.tools.workspace import read_confined, resolve_for_write, write_confined

MEMORY_FILE = "AGENT.md"
# AGENTS.md is the cross-tool convention for project instructions; AGENT.md is gaffer's memory.
INSTRUCTION_FILES = ("AGENT.md", "AGENTS.md")
# A project's instructions share the context window with the work: cap each file.
MAX_INSTRUCTIONS_BYTES = 32 * 1024
MAX_ENTRY_CHARS = 2000
# Far past what a prompt loads: a memory this big is a mistake to fix, not to grow.
MAX_MEMORY_BYTES = 1024 * 1024
HEADING = "## Remembered by gaffer"


class RememberArgs(Args):
    content: str = Field(description="One convention or preference, in a sentence or two.")


def remember(ctx: ToolContext, args: RememberArgs) -> ToolResult:
    entry = " ".join(args.content.split())
    if not entry:
        raise ToolError("content is empty; say what to remember")
    if len(entry) > MAX_ENTRY_CHARS:
        raise ToolError(f"that is {len(entry)} characters; keep an entry under {MAX_ENTRY_CHARS}")
    path = resolve_for_write(ctx.workspace, MEMORY_FILE)
    old = read_confined(ctx.workspace, MEMORY_FILE, MAX_MEMORY_BYTES)
    if old is not None and len(old) > MAX_MEMORY_BYTES:
        raise ToolError(f"{MEMORY_FILE} is over {MAX_MEMORY_BYTES // 1024} KB; tidy it first")
    text = old.decode("utf-8", errors="replace") if old is not None else "# AGENT.md\n"
    if HEADING not in text:
        text = text.rstrip("\n") + f"\n\n{HEADING}\n\n"
    elif not text.endswith("\n"):
        text += "\n"
    text += f"- {dt.date.today().isoformat()}: {entry}\n"
    write_confined(ctx.workspace, path, text.encode("utf-8"))
    return ToolResult(
        output=f"remembered in {MEMORY_FILE}; every future run will read it",
        summary="remembered",
        facts=Facts(modified=(MEMORY_FILE,), memory=True),
    )


def project_instructions(workspace: Path, warn: Callable[[str], None] | None = None) -> str:
    """AGENT.md and AGENTS.md, each capped, as one block for a system prompt ('' if none).

    Read through the same confinement as read_file: a file that is a link out of the
    workspace (to a host file, to /proc/self/environ) or a hard link is not loaded.
    """
    parts = []
    for name in INSTRUCTION_FILES:
        try:
            data = read_confined(workspace, name, MAX_INSTRUCTIONS_BYTES)
        except ToolError as error:
            if warn is not None:
                warn(f"{name} not loaded: {error}")
            continue
        if data is None:
            continue
        text = data[:MAX_INSTRUCTIONS_BYTES].decode("utf-8", errors="replace")
        if len(data) > MAX_INSTRUCTIONS_BYTES:
            text += f"\n…(the rest of {name}, past {MAX_INSTRUCTIONS_BYTES // 1024} KB, not loaded)"
        parts.append(f"## {name}\n\n{text.strip()}")
    return "\n\n".join(parts)


REMEMBER = Tool(
    name="remember",
    description=(
        "Save a lasting convention or preference of this project or its user to AGENT.md, "
        "which every future run reads: how to run the tests, code style, names to use, things "
        "to avoid. Store conventions and preferences, not conclusions about the current task."
    ),
    args=RememberArgs,
    run=remember,
    read_only=False,
)
