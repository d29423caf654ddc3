"""The host sandbox: tools run in this process, every path confined to the workspace."""

from __future__ import annotations

import dataclasses
from typing import Any

from workers.limits import Budget
from workers.tools.base import Args, Tool, ToolContext, ToolResult


class HostSandbox:
    name = "host"
    container_id: str | None = None

    def __init__(self, context: ToolContext) -> None:
        self.context = context
        self.quarantined: list[Any] = []

    def run(
        self, tool: Tool[Any], args: Args, budget: Budget, output_chars: int | None = None
    ) -> ToolResult:
        context = dataclasses.replace(
            self.context,
            deadline=budget.deadline_at(),
            cancelled=budget.cancelled,
            max_output_chars=output_chars,
        )
        return tool.run(context, args)
