"""Project memory: `remember` appends to AGENT.md; AGENT.md and AGENTS.md are read at start."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from workers.facts import Facts
from workers.tools.base import Args, Tool, ToolContext, ToolError, ToolResult
from workers.tools.workspace import (
    read_confined,
    relative,
    resolve_for_write,
    shown_name,
    write_confined,
)

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
    written = relative(ctx.workspace, path)
    if path.name not in INSTRUCTION_FILES:
        # A link named AGENT.md (a repository can ship one, a container can make one) to
        # the code would have the run's memory written into it, recorded as AGENT.md; a
        # link to AGENTS.md, which projects keep for every tool, is where memory goes.
        raise ToolError(
            f"{MEMORY_FILE} is a link to {shown_name(written)!r}; remember writes no file "
            "through it"
        )
    old = read_confined(ctx.workspace, written, MAX_MEMORY_BYTES)
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
        output=f"remembered in {written}; every future run will read it",
        summary="remembered",
        facts=Facts(modified=(written,), memory=True),
    )


def project_instructions(
    workspace: Path, warn: Callable[[str], None] | None = None, here: Path | None = None
) -> str:
    """The instructions for every agent, as one block for a system prompt ('' if none):
    the user's own (`~/.config/gaffer/AGENTS.md`), then the workspace's AGENT.md and
    AGENTS.md, then each AGENTS.md in the folders down to `here` (where gaffer was
    started; default the current folder), nearest last, as Codex reads them.

    The workspace's files are read through the same confinement as read_file: a file
    that is a link out of the workspace (to a host file, to /proc/self/environ) or a
    hard link is not loaded. Each file is capped."""
    parts = []
    user = _user_instructions()
    if user is not None and (text := _capped(user, "your AGENTS.md")):
        parts.append(f"## ~/.config/gaffer/AGENTS.md\n\n{text}")
    root = Path(os.path.realpath(workspace))
    here = Path(os.path.realpath(here if here is not None else Path.cwd()))
    names = list(INSTRUCTION_FILES)
    if here != root and str(here).startswith(str(root) + os.sep):
        below = here.relative_to(root).parts
        names += [f"{'/'.join(below[: n + 1])}/AGENTS.md" for n in range(len(below))]
    for name in names:
        try:
            data = read_confined(workspace, name, MAX_INSTRUCTIONS_BYTES)
        except ToolError as error:
            if warn is not None:
                warn(f"{name} not loaded: {error}")
            continue
        if data is not None:
            parts.append(f"## {name}\n\n{_capped(data, name)}")
    return "\n\n".join(parts)


def _capped(data: bytes, name: str) -> str:
    text = data[:MAX_INSTRUCTIONS_BYTES].decode("utf-8", errors="replace")
    if len(data) > MAX_INSTRUCTIONS_BYTES:
        text += f"\n…(the rest of {name}, past {MAX_INSTRUCTIONS_BYTES // 1024} KB, not loaded)"
    return text.strip()


def _user_instructions() -> bytes | None:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    try:
        with open(Path(base) / "gaffer" / "AGENTS.md", "rb") as file:
            return file.read(MAX_INSTRUCTIONS_BYTES + 1)
    except OSError:
        return None


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
