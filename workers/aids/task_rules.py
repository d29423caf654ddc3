"""The task's rules held for its writes from its first step (workers/guards/task_rules.py)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from pathlib import Path

from workers.assembly.specs import AgentSpec
from workers.guards.task_rules import KeptTests, kept_files, kept_tests
from workers.hooks import Aid, View


class TaskRules(Aid):
    """The tests the task keeps, read from it before the first step and given to the edit
    guard. `by_command`: also those its named test command runs (for a small model)."""

    def __init__(self, *, by_command: bool) -> None:
        self.by_command = by_command

    def kept(self, task: str, workspace: Path, runners: Iterable[str]) -> KeptTests | None:
        return kept_tests(task, workspace, runners, by_command=self.by_command)

    def before_first_step(self, view: View) -> None:
        if view.edits is not None:
            view.edits.kept = self.kept(view.task, view.edits.workspace, view.test_runners)


def task_rules_for(tools: Collection[str], *, file_blocks: bool) -> TaskRules | None:
    """The task-rules aid of an agent with these tools: one that writes files has it;
    `file_blocks`: the run's editors write in blocks (a small model)."""
    if "write_file" not in tools and "edit_file" not in tools:
        return None
    return TaskRules(by_command=file_blocks and "write_file" in tools)


def read_only_tests(
    spec: AgentSpec, task: str, workspace: Path, runners: Iterable[str], *, file_blocks: bool
) -> tuple[str, ...]:
    """The tests an agent may not change in this task, as they are in the workspace before
    it starts: what its container mounts read-only (none on the host). `runners` and
    `file_blocks` are the run's (AgentRules)."""
    aid = task_rules_for(spec.tools, file_blocks=file_blocks)
    if aid is None or not spec.in_container:
        return ()
    kept = aid.kept(task, workspace, runners)
    return kept_files(kept, workspace) if kept is not None else ()
