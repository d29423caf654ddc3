"""The task's rules held for its writes from its first step (workers/guards/task_rules.py)."""

from __future__ import annotations

from workers.guards.task_rules import kept_tests
from workers.hooks import Aid, View


class TaskRules(Aid):
    """The tests the task keeps, read from it before the first step and given to the edit
    guard. `by_command`: also those its named test command runs (for a small model)."""

    def __init__(self, *, by_command: bool) -> None:
        self.by_command = by_command

    def before_first_step(self, view: View) -> None:
        if view.edits is not None:
            view.edits.kept = kept_tests(
                view.task, view.edits.workspace, view.test_runners, by_command=self.by_command
            )
