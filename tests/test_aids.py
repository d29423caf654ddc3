"""Each small-model aid through a fake view and no loop (workers/hooks.py): what it asks,
what it runs as the agent, what it tells it and when it steps aside. Files and test runs
are real; only the model is scripted."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workers.agent_view import FromGuards
from workers.aids import aids_for
from workers.aids.file_blocks import FileBlocks
from workers.aids.focused_write import MAX_FOCUSED_WRITES, FocusedWrite
from workers.aids.fresh_attempts import FRESH_TEMPERATURE, FreshAttempts
from workers.aids.task_files import TaskFiles
from workers.changes.snapshots import Store
from workers.changes.tracker import ChangeTracker
from workers.facts import Facts
from workers.guards.editing import EditGuard
from workers.hooks import ATTACHED, FOUND, Checkpoint, Finish, Resume
from workers.log.schema import Event
from workers.model import AssistantTurn, ToolCall
from workers.tools.base import ToolResult

TEST_RUN = f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
RIGHT = "def add(a, b):\n    return a + b\n"


def block(body: str, path: str = "calc.py") -> str:
    return f"{path}\n```python\n{body}```"


class FakeView(FromGuards):
    """The agent seen from the side: a workspace on disk, its edit guard and change
    tracker, a scripted model for asides, and write_file and run_shell run for real."""

    def __init__(
        self, workspace: Path, task: str, asides: Sequence[str] = (), *, spent: bool = False
    ) -> None:
        self.workspace = workspace
        self.step = 3
        self.task = task
        self.latest_request = task
        self.looked = False
        self.edits: EditGuard | None = EditGuard(workspace)
        self.changes: ChangeTracker | None = ChangeTracker(Store(workspace))
        self.room_for_files = 48_000
        self.test_runners: tuple[str, ...] = ()
        self.asides = list(asides)
        self.asked: list[tuple[str, float | None]] = []
        self.told: list[tuple[str, str]] = []
        self.ran: list[tuple[str, dict[str, Any], bool]] = []
        self.emitted: list[Event] = []
        self.evidence: list[Facts] = []
        self.answer = ""
        self.is_spent = spent
        self.bad_replies = 0
        self.seconds_left: float | None = None

    @property
    def facts(self) -> Sequence[Facts]:
        return tuple(self.evidence)

    @property
    def check_command(self) -> str | None:
        """As a run with no check of its own: the command the task names."""
        from workers.check.choose import named_command

        return named_command(self.task, self.test_runners)

    def spent(self) -> bool:
        return self.is_spent

    def reply_was_bad(self) -> None:
        self.bad_replies += 1

    def tell(self, content: str, *, source: str) -> None:
        self.told.append((source, content))

    def ask_aside(
        self,
        prompt: str,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: tuple[str, ...] = (),
        seconds: float | None = None,
    ) -> AssistantTurn:
        self.asked.append((prompt, temperature))
        self.aside_seconds = seconds
        return AssistantTurn(text=self.asides.pop(0))

    def answer_with_tools_off(self, unanswered: str) -> str:
        return self.answer

    def run(
        self,
        call: ToolCall,
        arguments: dict[str, Any],
        *,
        checked: bool = True,
        from_block: bool = False,
    ) -> ToolResult:
        self.ran.append((call.name, arguments, checked))
        assert self.edits is not None
        if refusal := self.edits.before(call.name, arguments):
            return refusal
        if call.name == "write_file":
            (self.workspace / arguments["path"]).write_text(arguments["content"])
            assert self.changes is not None
            self.changes.look()
            result = ToolResult(
                output=f"wrote {arguments['path']}", facts=Facts(modified=(arguments["path"],))
            )
        else:
            done = subprocess.run(
                arguments["command"], shell=True, cwd=self.workspace, capture_output=True, text=True
            )
            result = ToolResult(
                output=done.stdout + done.stderr,
                is_error=done.returncode != 0,
                facts=Facts(command=arguments["command"], exit_code=done.returncode),
            )
        result = self.edits.after(call.name, arguments, result)
        self.evidence.append(result.facts)
        return result

    def read_in_sandbox(self, path: str, *, tool: str = "read_file") -> ToolResult:
        target = self.workspace / path
        if tool == "list_dir":
            return ToolResult(output="\n".join(sorted(p.name for p in target.iterdir())))
        if not target.is_file():
            return ToolResult(output=f"no file {path}", is_error=True)
        return ToolResult(output=target.read_text())

    def emit(self, event: Event) -> None:
        self.emitted.append(event)

    @property
    def _edits(self) -> EditGuard | None:  # what FromGuards answers from
        return self.edits

    @property
    def _changes(self) -> ChangeTracker | None:
        return self.changes

    def checkpoint(self) -> Checkpoint:
        assert self.edits is not None
        return Checkpoint(len(self.evidence), self.edits.last_failure, self.edits.untested_edit)

    def restore(self, checkpoint: Checkpoint) -> None:
        assert self.edits is not None
        del self.evidence[checkpoint.facts :]
        self.edits.last_failure = checkpoint.last_failure
        self.edits.untested_edit = checkpoint.untested_edit


def project(workspace: Path, code: str) -> None:
    (workspace / "calc.py").write_text(code)
    (workspace / "test_calc.py").write_text(TESTS)


def read(view: FakeView, *paths: str) -> None:
    """The agent has read these files whole."""
    assert view.edits is not None
    for path in paths:
        view.edits.after("read_file", {"path": path}, ToolResult(output=""))


def write(view: FakeView, content: str, path: str = "calc.py") -> None:
    arguments = {"path": path, "content": content}
    view.run(ToolCall("w", "write_file", json.dumps(arguments)), arguments)


def shell(view: FakeView, command: str) -> ToolResult:
    arguments = {"command": command}
    return view.run(ToolCall("c", "run_shell", json.dumps(arguments)), arguments)


def test_file_blocks_become_checked_writes_told_after_the_calls(workspace: Path) -> None:
    project(workspace, "def add(a, b):\n    return a - b\n")
    view = FakeView(workspace, "Fix add.")
    read(view, "calc.py")
    aid = FileBlocks()

    note = aid.after_reply(view, AssistantTurn(text=block(RIGHT)))

    assert (workspace / "calc.py").read_text() == RIGHT
    assert note is not None and note.source == "file_blocks" and "calc.py" in note.content
    assert [(name, checked) for name, _, checked in view.ran] == [("write_file", True)]
    assert aid.hidden_tools == {"write_file", "edit_file"}, "not offered: the aid writes"


def test_an_echoed_block_is_told_once_and_plain_prose_is_left_alone(workspace: Path) -> None:
    project(workspace, RIGHT)
    view = FakeView(workspace, "Fix add.")
    read(view, "calc.py")
    aid = FileBlocks()

    first = aid.after_reply(view, AssistantTurn(text=block(RIGHT)))
    again = aid.after_reply(view, AssistantTurn(text=block(RIGHT)))

    assert first is not None and first.content.startswith("Nothing was written")
    assert again is None, "the echo note comes once a run; then it is an answer"
    assert aid.after_reply(view, AssistantTurn(text="add is fixed.")) is None
    aid.before_first_step(view)
    assert aid.after_reply(view, AssistantTurn(text=block(RIGHT))) is not None, "a new run"
    assert view.ran == []


def test_a_focused_ask_writes_the_change_and_resumes_until_its_allowance_is_spent(
    workspace: Path,
) -> None:
    project(workspace, "def add(a, b):\n    return a - b\n")
    view = FakeView(workspace, "Fix add in calc.py.", asides=[block(RIGHT)])
    read(view, "calc.py", "test_calc.py")
    aid = FocusedWrite()

    assert aid.when_stuck(view, said="I would change the minus to a plus.") == Resume()

    prompt, temperature = view.asked[0]
    assert "return a - b" in prompt and "minus to a plus" in prompt and temperature is None
    assert prompt.index("calc.py\n") < prompt.index("test_calc.py\n"), "code first, tests last"
    assert (workspace / "calc.py").read_text() == RIGHT
    assert view.told[-1][0] == "focused_write" and "Next, run the tests" in view.told[-1][1]
    aid.asked = MAX_FOCUSED_WRITES
    assert aid.when_stuck(view, said="") is None, "at most twice a run"


def test_a_focused_ask_steps_aside_when_spent_or_when_nothing_is_to_change(
    workspace: Path,
) -> None:
    project(workspace, "def add(a, b):\n    return a - b\n")
    spent = FakeView(workspace, "Fix add in calc.py.", spent=True)
    read(spent, "calc.py")
    question = FakeView(workspace, "Why does add return -1?")
    read(question, "calc.py")

    assert FocusedWrite().when_stuck(spent, said="") is None
    assert FocusedWrite().when_stuck(question, said="") is None, "a question asks for no write"
    assert spent.asked == question.asked == []


def test_fresh_attempts_keep_the_sample_that_passes_and_take_back_the_one_that_fails(
    workspace: Path,
) -> None:
    project(workspace, "def add(a, b):\n    return a - b\n")
    wrong = "def add(a, b):\n    return b - a\n"
    view = FakeView(
        workspace, f"Fix add in calc.py. Run `{TEST_RUN}`.", asides=[block(wrong), block(RIGHT)]
    )
    read(view, "calc.py", "test_calc.py")
    write(view, "def add(a, b):\n    return a * b\n")  # its own fix
    shell(view, TEST_RUN)  # fails
    before = view.checkpoint()
    view.answer = "I fixed add.\n```python\nprint('not shown')\n```"
    aid = FreshAttempts()

    step_on = aid.when_stuck(view, said="")

    assert step_on == Finish("I fixed add."), "the model's account, its code left out"
    assert (workspace / "calc.py").read_text() == RIGHT
    assert [t for _, t in view.asked] == [FRESH_TEMPERATURE] * 2
    assert "return a - b" in view.asked[0][0], "asked from the files as they were"
    kept = [e for e in view.emitted if getattr(e, "kept", None) is not None]
    assert [e.kept for e in kept] == [False, True]  # type: ignore[attr-defined]
    assert all(not checked for name, _, checked in view.ran[2:]), "no repetition guard"
    assert len(view.facts) == before.facts + 2, "the failed sample left no evidence"
    assert aid.when_stuck(view, said="") is None, "once a run"


def test_fresh_attempts_give_gaffers_account_when_the_model_gives_none(workspace: Path) -> None:
    project(workspace, "def add(a, b):\n    return a - b\n")
    view = FakeView(workspace, f"Fix add. Run `{TEST_RUN}`.", asides=[block(RIGHT)])
    read(view, "calc.py", "test_calc.py")
    write(view, "def add(a, b):\n    return a * b\n")
    shell(view, TEST_RUN)

    step_on = FreshAttempts().when_stuck(view, said="")

    assert isinstance(step_on, Finish)
    assert step_on.answer.startswith("gaffer asked for the change afresh and kept sample 1")


def test_fresh_attempts_wait_for_a_failing_test_run(workspace: Path) -> None:
    project(workspace, "def add(a, b):\n    return a - b\n")
    view = FakeView(workspace, f"Fix add. Run `{TEST_RUN}`.")
    read(view, "calc.py")
    write(view, RIGHT)
    assert FreshAttempts().when_stuck(view, said="") is None, "no test has run"
    shell(view, TEST_RUN)
    assert FreshAttempts().when_stuck(view, said="") is None, "the tests pass"
    assert view.asked == []


def test_task_files_are_attached_once_with_what_they_import(workspace: Path) -> None:
    project(workspace, "def add(a, b):\n    return a - b\n")
    view = FakeView(workspace, "Fix test_calc.py so it passes; see gone.py.")

    TaskFiles(container_root=None).before_first_step(view)

    [(source, told)] = view.told
    assert source == "attachment" and told.startswith(ATTACHED)
    assert '<file path="test_calc.py">' in told and '<file path="calc.py">' in told
    assert "gone.py" not in told, "a name that is no file is left out unsaid"
    assert view.edits is not None and {"calc.py", "test_calc.py"} <= set(view.edits.seen)
    view.looked = True
    TaskFiles(container_root=None).before_first_step(view)
    assert len(view.told) == 1, "a conversation that has looked keeps what it has"


def test_a_reader_asked_in_words_is_told_the_paths_its_words_are_in(workspace: Path) -> None:
    for folder in ("core/sandbox", "docs"):
        (workspace / folder).mkdir(parents=True)
    (workspace / "core" / "loop.py").write_text("")
    (workspace / "core" / "sandbox" / "docker.py").write_text("")
    (workspace / "docs" / "sandboxing.md").write_text("")
    (workspace / "core" / "cache.py").write_text("")
    (workspace / "core" / "worker_sandbox.py").write_text("")
    view = FakeView(workspace, "How is a worker sandboxed?\n\nThe whole task: the loop too.")
    view.edits = None

    TaskFiles(container_root=None, workspace=workspace).before_first_step(view)

    [(source, told)] = view.told
    assert source == "attachment" and told.startswith(FOUND)
    lines = told.splitlines()[2:]
    assert lines == [
        "core/worker_sandbox.py",
        "core/sandbox/",
        "docs/sandboxing.md",
        "core/sandbox/docker.py",
    ], "the most words first, then the shortest; the question's words only"
    asked_where = FakeView(workspace, "Where is the cache?")
    asked_where.edits = None
    TaskFiles(container_root=None, workspace=workspace).before_first_step(asked_where)
    assert asked_where.told[0][1].splitlines()[1:] == [
        "Files and folders whose paths hold 'cache':",
        "core/cache.py",
    ]
    nothing = FakeView(workspace, "What is each top-level folder for?")
    nothing.edits = None
    TaskFiles(container_root=None, workspace=workspace).before_first_step(nothing)
    [(_, told)] = nothing.told
    assert told.splitlines()[1:] == ["The top level of the workspace (list_dir .):", "core", "docs"]


def test_assembly_gives_each_agent_only_the_aids_it_can_use() -> None:
    every = {"read_file": 1, "write_file": 1, "run_shell": 1}

    def names(**kwargs: Any) -> list[str]:
        return [type(aid).__name__ for aid in aids_for(every, None, **kwargs).each]

    assert names(attach_task_files=True, file_blocks=True, tracks_changes=True) == [
        "TaskFiles",
        "TaskRules",
        "FileBlocks",
        "TestsAfterWrites",
        "FreshAttempts",
        "FocusedWrite",
    ], "stuck on failing tests: fresh attempts before the focused ask"
    assert names(attach_task_files=False, file_blocks=True, tracks_changes=False) == [
        "TaskRules",
        "FileBlocks",
        "TestsAfterWrites",
        "FocusedWrite",
    ], "no fresh attempt where a sample cannot be taken back"
    readers = aids_for(
        {"read_file": 1}, None, attach_task_files=False, file_blocks=True, tracks_changes=False
    )
    assert "TestsAfterWrites" not in [type(a).__name__ for a in readers.each], "none to run them"
    assert names(attach_task_files=True, file_blocks=False, tracks_changes=True) == [
        "TaskFiles",
        "TaskRules",
    ]
    plain = aids_for(every, None, attach_task_files=False, file_blocks=False, tracks_changes=True)
    assert plain.hint == "" and not plain.writes_while_paused and not plain.hidden_tools
