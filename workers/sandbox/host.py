"""The host sandbox: tools run in this process, every path confined to the workspace."""

from __future__ import annotations

import dataclasses
from typing import Any

from workers.tools.base import Args, Tool, ToolContext, ToolResult


class HostSandbox:
    name = "host"

    def __init__(self, context: ToolContext) -> None:
        self.context = context

    def run(self, tool: Tool[Any], args: Args, deadline: float | None) -> ToolResult:
        return tool.run(dataclasses.replace(self.context, deadline=deadline), args)
