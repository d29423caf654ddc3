"""The `delegate` tool as the model sees it: its arguments (the profile an enum of what
the run allows: models follow enums) and its description. What it does is the team's
(supervisor/delegation.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from pydantic import Field, create_model

from workers.tools.base import Args, Tool, ToolContext, ToolResult

Start = Callable[[str, str], Callable[[], ToolResult] | None]
"""(profile, task) -> what waits for a worker started now, or None to run it in order."""


def delegate_tool(
    profiles: list[str], delegate: Callable[[str, str], ToolResult], begin: Start
) -> Tool[Any]:
    names = profiles or ["none"]
    args_model = create_model(
        "DelegateArgs",
        __base__=Args,
        profile=(
            str,
            Field(
                description="Which worker profile: " + ", ".join(names),
                json_schema_extra={"enum": cast(Any, names)},
            ),
        ),
        task=(
            str,
            Field(description="A self-contained task: what to do, where, and what to report."),
        ),
    )

    def run(_ctx: ToolContext, args: Any) -> ToolResult:
        return delegate(args.profile, args.task)

    return Tool(
        name="delegate",
        description=(
            "Hand a task to a worker agent with the given profile and get its report. Several "
            "delegate calls in one turn run in parallel for read-only profiles and those "
            "working on a copy of their own (their changes come in as each ends; a conflict "
            "is reported); other profiles that change files run one at a time, in order."
        ),
        args=args_model,
        run=run,
        read_only=False,
        begin=lambda args: begin(args.profile, args.task),
        kind="harness",
        origin="harness",
    )
