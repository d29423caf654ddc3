"""The task's rules held for its writes from its first step (workers/guards/task_rules.py)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Protocol

from workers.assembly.specs import AgentSpec
from workers.guards.task_rules import KeptTests, kept_files, kept_tests
from workers.hooks import Aid, View


class TaskRules(Aid):
    """The tests the task keeps, read from it before the first step and given to the edit
    guard. `by_command`: also those its named test command runs (for a small model).
    `user_task`: what the user asked for, whose rules hold too (a worker's task is a
    model's words, and may leave them out)."""

    def __init__(self, *, by_command: bool, user_task: str = "") -> None:
        self.by_command = by_command
        self.user_task = user_task

    def kept(self, task: str, workspace: Path, runners: Iterable[str]) -> KeptTests | None:
        if not self.user_task or self.user_task == task:
            return kept_tests(task, workspace, runners, by_command=self.by_command)
        both = f"{self.user_task}\n\n{task}"
        return kept_tests(both, workspace, runners, by_command=self.by_command)

    def before_first_step(self, view: View) -> None:
        if (files := view.files_seen()) is not None:
            view.keep_tests(self.kept(view.task, files.workspace, view.test_runners))


def task_rules_for(
    tools: Collection[str], *, file_blocks: bool, user_task: str = ""
) -> TaskRules | None:
    """The task-rules aid of an agent with these tools: one that can change files has it;
    `file_blocks`: the run's editors write in blocks (a small model)."""
    if not {"write_file", "edit_file", "run_shell"} & set(tools):
        return None
    return TaskRules(by_command=file_blocks and "write_file" in tools, user_task=user_task)


class _Rules(Protocol):
    @property
    def test_runners(self) -> tuple[str, ...]: ...
    @property
    def file_blocks(self) -> bool: ...


class _Setting(Protocol):
    """What of a run's setting (workers/assembly/build.py RunSetting) decides the rules."""

    @property
    def workspace(self) -> Path: ...
    @property
    def rules(self) -> _Rules: ...
    @property
    def user_task(self) -> str: ...


def read_only_tests(spec: AgentSpec, task: str, setting: _Setting) -> tuple[str, ...]:
    """The tests an agent may not change in its `task`, as they are in the workspace
    before it starts: what its container mounts read-only (none on the host)."""
    rules = setting.rules
    aid = task_rules_for(spec.tools, file_blocks=rules.file_blocks, user_task=setting.user_task)
    if aid is None or not spec.in_container:
        return ()
    kept = aid.kept(task, setting.workspace, rules.test_runners)
    return kept_files(kept, setting.workspace) if kept is not None else ()
