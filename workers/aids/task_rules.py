"""The task's rules held for its writes from its first step (workers/guards/task_rules.py):
the file tools are refused before they write a kept test, and what a command changed in
one is put back after the batch that ran it."""

from __future__ import annotations

from workers.changes.change_sets import Change
from workers.changes.undo import CannotUndo, undo
from workers.guards.task_rules import KeptTests, code_under_test, kept_tests
from workers.hooks import Aid, View
from workers.tools.base import ToolResult

PUT_BACK = (
    "put back: your commands changed {paths}, among the task's tests, which stay as they "
    "are in this run ({why}); gaffer put {them} back as {they} {were}. Change {code} instead."
)
NOT_PUT_BACK = (
    "your commands changed {paths}, among the task's tests, which stay as they are in this "
    "run ({why}), and gaffer could not put {them} back ({error}). The run is judged by the "
    "tests as they were."
)


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

    def after_calls(self, view: View) -> None:
        """A command (`sed -i`, `cat >`, `mv`) changed a kept test's source: it is put
        back, before the tests run after the batch, and the agent told so in one line."""
        edits, changes = view.edits, view.changes
        if edits is None or edits.kept is None or changes is None:
            return
        kept = edits.kept
        touched = [c for c in changes.since_start() if _changes_kept(c, kept)]
        if not touched:
            return
        every = [p for c in touched for p in (c.path, c.old_path) if p is not None]
        paths = sorted({p for p in every if _kept(p, kept)})
        one = len(paths) == 1
        said = {
            "paths": ", ".join(paths),
            "why": kept.why,
            "them": "it" if one else "them",
            "they": "it" if one else "they",
            "were": "was" if one else "were",
        }
        try:
            undo(changes.store, touched)
        except CannotUndo as error:
            changes.look()
            view.tell(NOT_PUT_BACK.format(**said, error=error), source="task_rules")
            return
        changes.look()
        for path in paths:  # as it was when the agent read it
            edits.after("read_file", {"path": path}, ToolResult(output=""))
        code = code_under_test(edits.workspace, paths[0], edits.seen) or "the code they test"
        view.tell(PUT_BACK.format(**said, code=code), source="task_rules")


def _changes_kept(change: Change, kept: KeptTests) -> bool:
    """A change to a kept test's source, where it is or was."""
    return any(_kept(p, kept) for p in (change.path, change.old_path) if p is not None)


def _kept(path: str, kept: KeptTests) -> bool:
    """A kept test's source (a test, or pytest's conftest.py); what a test run leaves
    (bytecode, caches) is not the tests."""
    return path.endswith(".py") and "__pycache__/" not in path and kept.keeps(path)
