"""The `delegate` tool as the model sees it: its arguments (the profile an enum of what
the run allows: models follow enums) and its description. What it does is the team's
(supervisor/delegation.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from pydantic import Field, create_model

from workers.tools.base import Args, Tool, ToolContext, ToolError, ToolResult

Start = Callable[[str, list[str]], Callable[[], ToolResult] | None]
"""(profile, tasks) -> what waits for workers started now, or None to run them in order."""
MAX_TASKS = 16
"""Tasks one call may fan out to; the run's own cap on workers still holds."""


def delegate_tool(
    profiles: list[str], delegate: Callable[[str, list[str]], ToolResult], begin: Start
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
            Field(
                "",
                description="A self-contained task: what to do, where, and what to report.",
            ),
        ),
        tasks=(
            list[str],
            Field(
                default_factory=list,
                max_length=MAX_TASKS,
                description="Instead of `task`: several self-contained tasks for this "
                "profile, one worker each; their reports come back in this order.",
            ),
        ),
    )

    def run(_ctx: ToolContext, args: Any) -> ToolResult:
        return delegate(args.profile, _tasks(args))

    def start(args: Any) -> Callable[[], ToolResult] | None:
        try:
            tasks = _tasks(args)
        except ToolError:
            return None  # run in order: the call's result says what is wrong
        return begin(args.profile, tasks)

    return Tool(
        name="delegate",
        description=(
            "Hand a task to a worker agent with the given profile and get its report; give "
            "`tasks` instead of `task` for several workers of that profile at once, their "
            "reports in order. Workers of read-only profiles, and of those working on a copy "
            "of their own, run in parallel (their changes come in as each ends; a conflict "
            "is reported), in one call or several in one turn; other profiles that change "
            "files run one at a time, in order."
        ),
        args=args_model,
        run=run,
        read_only=False,
        begin=start,
        kind="harness",
        origin="harness",
    )


def _tasks(args: Any) -> list[str]:
    """The call's tasks: `task`, or `tasks`; ToolError when it gives neither, both, or
    an empty one (the model is told, and nothing starts)."""
    tasks = [t for t in args.tasks]
    if args.task.strip() and tasks:
        raise ToolError("give `task` or `tasks`, not both")
    if args.task.strip():
        return [args.task]
    if not tasks:
        raise ToolError("give the worker a `task` (or several workers `tasks`)")
    if not all(t.strip() for t in tasks):
        raise ToolError("a task in `tasks` is empty; say what each worker should do")
    return tasks
