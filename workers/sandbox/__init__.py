"""Where a worker's tools execute: the host, confined to the workspace, or a container."""

from __future__ import annotations

from typing import Any, Protocol

from workers.limits import Budget
from workers.tools.base import Args, Tool, ToolResult


class SandboxFault(Exception):
    """The sandbox itself broke (container gone, daemon down): a harness fault, never the model's."""


class NodeLost(SandboxFault):
    """The cluster node the tools ran on is gone: its worker ends `interrupted`, never
    retried silently (workers/cluster)."""


class SandboxUnavailable(Exception):
    """The sandbox cannot start; the message says how to fix it, in one line."""


class Sandbox(Protocol):
    name: str
    """`host` or `docker`: written on every tool_call line."""
    container_id: str | None
    """The container the tools run in, for the log; None on the host."""
    quarantined: list[Any]
    """What the sandbox planted that the host would run, moved aside when it ended
    (quarantine.Quarantined); always empty on the host."""

    def run(
        self, tool: Tool[Any], args: Args, budget: Budget, output_chars: int | None = None
    ) -> ToolResult:
        """Run one validated tool call, its result within `output_chars`; ToolError for
        the model's mistakes, SandboxFault for ours."""
        ...
