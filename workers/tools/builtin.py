"""The built-in tools, by name; `workers.tools` hands them out when first asked for."""

from __future__ import annotations

from typing import Any

from workers.tools.base import Tool
from workers.tools.files import EDIT_FILE, LIST_DIR, READ_FILE, WRITE_FILE
from workers.tools.memory import REMEMBER
from workers.tools.search import FIND_FILES, GREP
from workers.tools.shell import RUN_SHELL

AnyTool = Tool[Any]

BUILTIN_TOOLS: dict[str, AnyTool] = {
    tool.name: tool
    for tool in (READ_FILE, WRITE_FILE, EDIT_FILE, LIST_DIR, GREP, FIND_FILES, RUN_SHELL, REMEMBER)
}


def pick(names: list[str], available: dict[str, AnyTool] | None = None) -> dict[str, AnyTool]:
    """The named tools, in the order given; an unknown name is a configuration error."""
    available = BUILTIN_TOOLS if available is None else available
    unknown = [n for n in names if n not in available]
    if unknown:
        raise KeyError(
            f"unknown tool(s): {', '.join(unknown)}; known: {', '.join(sorted(available))}"
        )
    return {n: available[n] for n in names}
