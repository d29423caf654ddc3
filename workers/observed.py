"""What the harness sees of a call for itself, beside what the tool says: the files it
really changed (the change tracker's snapshots before and after it), and a test run
that ran no tests."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from workers import executor
from workers.agent import Agent
from workers.guards.test_runs import is_test_run, ran_no_tests
from workers.model import ToolCall
from workers.tools.base import Tool, ToolResult


def executed(
    agent: Agent, call: ToolCall, args: dict[str, Any] | str, tool: Tool[Any] | None
) -> ToolResult:
    """The call run, with what the harness saw of it; a call that raises (a harness
    fault) still ends its span in the change tracker."""
    call_starts(agent, tool)
    try:
        result = executor.execute(
            call, args, agent.tools, agent.sandbox, agent.budget, agent.max_output_chars
        )
    except BaseException:
        if tool is not None:
            call_ends(agent, tool)
        raise
    return observed(agent, call.name, result)


def call_starts(agent: Agent, tool: Tool[Any] | None) -> None:
    """A call that may change files starts from the workspace as it is now: what someone
    else changed since the agent's last call is not in its change set."""
    if agent.changes is not None and tool is not None and not tool.read_only:
        with contextlib.suppress(OSError):  # unreadable: the call's change counts from before
            agent.changes.call_starts()


def call_ends(agent: Agent, tool: Tool[Any]) -> None:
    """What an overlapping call changed goes into the agent's change set (its workers
    report their own files; this is the span the agent answers for)."""
    if agent.changes is not None and not tool.read_only:
        with contextlib.suppress(OSError):
            agent.changes.changed_by_call()


def observed(agent: Agent, name: str, result: ToolResult) -> ToolResult:
    """The result with what the harness saw for itself: the files the call really
    changed (for an agent that can change files), and a test run that ran no tests."""
    facts = result.facts
    tool = agent.tools.get(name)
    if agent.changes is not None and tool is not None and not tool.read_only:
        try:
            changed = agent.changes.changed_by_call()
        except OSError:  # the workspace could not be read: the tool's own word stands
            changed = None
        if changed is not None and facts.worker is None:  # a worker's calls say their own
            paths = [p for c in changed for p in (c.old_path, c.path) if p is not None]
            facts = dataclasses.replace(facts, modified=tuple(paths))
    command = facts.command
    tests_run = command is not None and is_test_run(command, agent.test_runners)
    if tests_run and facts.exit_code == 0 and ran_no_tests(result.output):
        facts = dataclasses.replace(facts, no_tests=True)
    return result if facts == result.facts else dataclasses.replace(result, facts=facts)
