"""Tests after every write: gaffer runs the run's check command (workers/check/: the flag's,
the config's, the one the task names in any wording, or the project's own in a container)
after each batch that changed a file, as the agent's own run, with a deadline fitted to
the suite.

A small model writes its code and then forgets the tests: it rewrites the test file, or
answers. Nothing then says the code fails, and fresh attempts, which start from a failing
test run, never start. So after a reply's writes (blocks or calls) that no test run
followed, the task's own command runs in the agent's sandbox as a logged `run_shell`
call counted as the agent's, its result told to the agent; its facts are evidence, and a
failure is the edit guard's last failure, where fresh attempts start.

A test run that hangs (a written loop that never ends) is killed at a deadline fitted to
the suite: the last run that ended by itself, with a margin, else a named default, never
the shell's two minutes. A run killed there fails like any failing test.

Where the task keeps its tests (it is judged by them), code that passed them is not lost:
a small model with passing tests goes round, is nudged, and writes new code that fails.
Then the files go back to how they were at the passing run, the tests run again, and the
agent is told its change was taken back.
"""

from __future__ import annotations

import json

from workers.changes.undo import CannotUndo
from workers.guards.test_runs import is_test_run
from workers.hooks import Aid, View
from workers.model import ToolCall
from workers.tools.base import ToolResult

# Seconds gaffer's test run may take before anything is known of the suite: a small
# project's tests run in seconds, and a written loop that never ends should cost one
# minute, not the shell's two. Once a run ended, its suite's time with a margin
# (workers/guards/editing.py).
TEST_RUN_DEFAULT_S = 60
RAN = "gaffer ran the run's tests after your change (`{command}`):\n\n{output}"
TAKEN_BACK = (
    "Your change made the tests fail, and they passed before it: gaffer put {files} back as "
    "they were when they passed, and ran `{command}` again:\n\n{output}\n\nIf they pass, the "
    "task is done: give your final answer in plain sentences."
)


class TestsAfterWrites(Aid):
    """For an agent that can run commands, on a task that names its test command: the
    tests run after every batch that changed a file and ran no test after it."""

    def __init__(self) -> None:
        self.passed: int | None = None
        """How many steps the agent had taken at its last passing run, where the task
        keeps its tests."""

    def after_calls(self, view: View) -> None:
        command = view.check_command
        if view.files_seen() is None or command is None or view.spent():
            return
        if view.untested_edit:
            run = run_test(view, command, f"tests-{view.step}")
            view.tell(RAN.format(command=command, output=run.output), source="tests_after_write")
        if view.tracks_changes and view.keeps_tests:
            self._keep_what_passed(view, command)

    def _keep_what_passed(self, view: View, command: str) -> None:
        """Remember the workspace at a passing run; after a run that failed since, put
        back what the agent changed after it, and run the tests again."""
        if view.passing:
            self.passed = view.steps_taken()
            return
        runs = [
            f
            for f in view.facts
            if f.command is not None and is_test_run(f.command, view.test_runners)
        ]
        if self.passed is None or not runs or runs[-1].exit_code == 0:
            return
        # The agent's own steps since the pass: what the user changed meanwhile stays.
        since = view.changes_since(self.passed)
        if not since:
            return
        try:
            view.undo(since)
        except CannotUndo:
            return  # what is there stays the agent's, failing as it said
        view.look()
        for change in since:  # the agent knows these files as they are now
            view.saw(change.path)
        named = ", ".join(sorted({c.path for c in since}))
        run = run_test(view, command, f"passed-{view.step}")
        view.tell(
            TAKEN_BACK.format(files=named, command=command, output=run.output),
            source="tests_after_write",
        )


def run_test(view: View, command: str, call_id: str) -> ToolResult:
    """The test command, run by gaffer as the agent's own run_shell call, logged and
    counted as one, killed at a deadline fitted to the suite; its facts join the agent's
    evidence. The repetition guard does not see it: gaffer's runs never count as the
    agent going round."""
    fitted = view.deadline(command)
    arguments: dict[str, str | int] = {"command": command, "timeout": fitted or TEST_RUN_DEFAULT_S}
    call = ToolCall(id=call_id, name="run_shell", arguments=json.dumps(arguments))
    return view.run(call, arguments, checked=False)
