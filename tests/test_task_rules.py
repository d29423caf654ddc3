"""The tests a task keeps as they are are read-only to its agent's writes, each refusal one
line pointing at the code (workers/guards/task_rules.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.helpers import run_editor
from workers.agent import AgentResult
from workers.guards.task_rules import code_under_test, kept_tests
from workers.log.events import Recorder
from workers.model import AssistantTurn, Usage
from workers.model.scripted import ScriptedModel, call, say

ORIGINAL = "def add(a, b):\n    return a - b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
TEST_RUN = f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"
RIGHT = "def add(a, b):\n    return a + b\n"
POINTER = (
    "refused: test_calc.py is one of the task's tests, which stay as they are in this run "
    "(the task says not to modify the tests); nothing was written. Change calc.py instead."
)


def test_what_a_task_keeps(workspace: Path) -> None:
    (workspace / "tests").mkdir()
    for name in ("tests/test_x.py", "tests/test_y.py", "tests/conftest.py", "x.py"):
        (workspace / name).write_text("")
    for said in ("Fix the code, not the tests.", "Leave the tests alone.", "Don't edit test_x.py"):
        assert kept_tests(said, workspace) is not None, said
    kept = kept_tests("Fix x. Don't touch any test files.", workspace)
    assert kept is not None and [p for p in ("tests/test_y.py", "x.py") if kept.keeps(p)] == [
        "tests/test_y.py"
    ]
    named = kept_tests("Fix x. Run the tests with: pytest -q tests/test_x.py", workspace)
    assert named is not None and named.paths == ("tests/test_x.py",)
    assert named.keeps("tests/test_x.py") and not named.keeps("tests/test_y.py")
    everything = kept_tests("Fix x. Run: python -m pytest", workspace)
    assert everything is not None and everything.keeps("tests/conftest.py")
    assert kept_tests("Add a test for x. Run the tests with: pytest", workspace) is None
    assert kept_tests("Cover x with unit tests. Run the tests with: pytest", workspace) is None
    assert kept_tests("Fix x. Do not change the test command.", workspace) is None
    assert kept_tests("Fix x. Run: pytest", workspace, by_command=False) is None
    assert kept_tests("Fix x in x.py.", workspace) is None


def test_the_pointer_names_the_code_a_test_tests(workspace: Path) -> None:
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "stats.py").write_text("def median(xs): ...\n")
    (workspace / "tests").mkdir()
    (workspace / "tests" / "test_numbers.py").write_text("from pkg.stats import median\n")
    (workspace / "calc.py").write_text(ORIGINAL)
    assert code_under_test(workspace, "tests/test_numbers.py") == "pkg/stats.py"
    assert code_under_test(workspace, "test_calc.py") == "calc.py"


def run(
    workspace: Path, script: list[object], task: str, *, file_blocks: bool
) -> tuple[AgentResult, Recorder, ScriptedModel]:
    (workspace / "calc.py").write_text(ORIGINAL)
    (workspace / "test_calc.py").write_text(TESTS)
    return run_editor(workspace, script, task, file_blocks=file_blocks, track_changes=False)


def writes(recorder: Recorder) -> list[dict[str, object]]:
    return [r for r in recorder.records if r["event"] == "tool_call" and r["name"] == "write_file"]


def test_a_block_aimed_at_a_kept_test_is_refused_once_with_its_pointer(workspace: Path) -> None:
    """The reply is cut off at the cap inside the test file's block: it is refused, not
    sent back as cut off to be written again."""
    cut = AssistantTurn(
        text="test_calc.py\n```python\nfrom calc import add\n\n\ndef test_add():\n    assert",
        usage=Usage(10, 768),
        finish_reason="length",
    )
    fixed = f"calc.py\n```python\n{RIGHT}```"
    script = [call("read_file", path="calc.py"), cut, say(fixed), say("I fixed add.")]
    task = f"Fix add in calc.py. Do not modify the tests. Run the tests with: {TEST_RUN}"
    result, recorder, model = run(workspace, script, task, file_blocks=True)

    refused, written = writes(recorder)
    assert refused["is_error"] and refused["content"] == POINTER and refused["from_block"]
    assert refused["args"]["path"] == "test_calc.py"  # type: ignore[index]
    assert not written["is_error"] and (workspace / "calc.py").read_text() == RIGHT
    assert (workspace / "test_calc.py").read_text() == TESTS
    told = [r["content"] for r in recorder.records if r["event"] == "user_message"]
    assert told[0] == POINTER, "one line, and no word of writing it again"
    assert model.seen[2][-1]["content"] == POINTER
    assert not any("cut off" in t for t in told), "it is not asked for again"
    assert result.outcome.answer.endswith(
        "Verification: the agent's own test run passed (gaffer ran no check)"
    )  # type: ignore[union-attr]
    model.assert_used_up()


def test_a_reply_stops_where_a_block_for_a_kept_test_would_begin(workspace: Path) -> None:
    """Once the agent has seen a test its task keeps, each reply is asked to stop at that
    file's path line over a fence (the block would be refused: it is not paid for); the
    stop text is in the log. An agent that edits with tool calls is asked for no stop."""
    fixed = f"calc.py\n```python\n{RIGHT}```"
    script = [call("read_file", path="calc.py"), call("read_file", path="test_calc.py")]
    script += [say(fixed), say("I fixed add.")]
    task = f"Fix add in calc.py. Do not modify the tests. Run the tests with: {TEST_RUN}"
    _, recorder, model = run(workspace, script, task, file_blocks=True)
    assert model.stops == [(), (), ("test_calc.py\n```",), ("test_calc.py\n```",)]
    logged = [r.get("stop") for r in recorder.records if r["event"] == "llm_call"]
    assert logged == [None, None, ["test_calc.py\n```"], ["test_calc.py\n```"]]

    tools = [call("read_file", path="test_calc.py"), say("It tests add.")]
    _, _, model = run(workspace, tools, task, file_blocks=False)
    assert model.stops == [(), ()]


def test_a_write_call_to_a_kept_test_is_refused_for_any_editor(workspace: Path) -> None:
    script = [
        call("read_file", path="test_calc.py"),
        call("write_file", path="test_calc.py", content="def test_add():\n    pass\n"),
        say("I could not change the tests."),
    ]
    task = "Fix add in calc.py. The tests must not be changed."
    _, recorder, model = run(workspace, script, task, file_blocks=False)

    (refused,) = writes(recorder)
    assert refused["is_error"] and refused["content"] == POINTER
    assert (workspace / "test_calc.py").read_text() == TESTS
    model.assert_used_up()
