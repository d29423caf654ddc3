"""The tests a task names run after every write, as the agent's own run, with a deadline
fitted to the suite; a failure there, a hang included, is where fresh attempts start
(workers/aids/tests_after_writes.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_editor
from workers.agent import AgentResult
from workers.aids import tests_after_writes
from workers.aids.tests_after_writes import TEST_RUN_DEFAULT_S
from workers.guards.editing import TEST_RUN_MIN_S
from workers.log.events import Recorder
from workers.model import AssistantTurn
from workers.model.scripted import ScriptedModel, call, say

ORIGINAL = "def add(a, b):\n    return a - b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
TEST_RUN = f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"
TASK = f"Fix add in calc.py. Do not modify the tests. Run the tests with: {TEST_RUN}"
RIGHT = "def add(a, b):\n    return a + b\n"
ALSO_RIGHT = "def add(a, b):\n    return b + a\n"
WRONG = "def add(a, b):\n    return a * b\n"
HANGS = "def add(a, b):\n    while True:\n        pass\n"


def block(body: str, path: str = "calc.py") -> str:
    return f"{path}\n```python\n{body}```"


def run(
    workspace: Path, script: list[object], task: str = TASK
) -> tuple[AgentResult, Recorder, ScriptedModel]:
    (workspace / "calc.py").write_text(ORIGINAL)
    (workspace / "test_calc.py").write_text(TESTS)
    return run_editor(workspace, script, task)


def shell_runs(recorder: Recorder) -> list[dict[str, Any]]:
    return [r for r in recorder.records if r["event"] == "tool_call" and r["name"] == "run_shell"]


def told(recorder: Recorder, source: str) -> list[str]:
    return [
        r["content"]
        for r in recorder.records
        if r["event"] == "user_message" and r["source"] == source
    ]


def test_a_write_runs_the_test_command_the_task_names(workspace: Path) -> None:
    script = [
        call("read_file", path="calc.py"),
        say(block(RIGHT)),
        say(block(ALSO_RIGHT)),
        say("I fixed add."),
    ]
    result, recorder, model = run(workspace, script)

    runs = shell_runs(recorder)
    assert [r["tool_call_id"] for r in runs] == ["tests-2", "tests-3"], "one after each write"
    assert all(r["args"]["command"] == TEST_RUN and not r["is_error"] for r in runs)
    assert runs[0]["args"]["timeout"] == TEST_RUN_DEFAULT_S, "nothing known of the suite yet"
    assert runs[1]["args"]["timeout"] == TEST_RUN_MIN_S, "fitted to the run before it"
    ran = told(recorder, "tests_after_write")
    assert ran[0].startswith(f"gaffer ran the run's tests after your change (`{TEST_RUN}`)")
    assert "1 passed" in ran[0]
    assert model.seen[2][-1]["content"] == ran[0], "the model reads it before its next reply"
    assert result.outcome.answer.endswith(
        "Verification: the agent's own test run passed (gaffer ran no check)"
    )  # type: ignore[union-attr]
    model.assert_used_up()


def test_a_write_the_model_tests_itself_is_not_tested_again(workspace: Path) -> None:
    tested = call("run_shell", command=TEST_RUN)
    tested = AssistantTurn(text=block(RIGHT), tool_calls=tested.tool_calls, usage=tested.usage)
    script = [call("read_file", path="calc.py"), tested, say("I fixed add.")]
    _, recorder, model = run(workspace, script)

    assert [r["tool_call_id"] for r in shell_runs(recorder)] == [tested.tool_calls[0].id]
    assert told(recorder, "tests_after_write") == []
    model.assert_used_up()


def fixed_afresh(first: str) -> list[object]:
    """The agent writes `first` and, told the tests fail, says so; the first fresh sample
    is right."""
    return [
        call("read_file", path="calc.py"),
        say(block(first)),
        say("The tests fail."),
        say(block(RIGHT)),
        say("I fixed add."),
    ]


def test_fresh_attempts_start_from_the_failure_of_that_run(workspace: Path) -> None:
    """The model never runs the tests itself: gaffer's run after its write failed, and
    that is where the fresh attempts began."""
    result, recorder, model = run(workspace, fixed_afresh(WRONG))

    ids = [r["tool_call_id"] for r in shell_runs(recorder)]
    assert ids == ["tests-2", "fresh1-3-test"]
    assert "1 failed" in told(recorder, "tests_after_write")[0]
    kept = [r["kept"] for r in recorder.records if r["event"] == "fresh_attempt"]
    assert kept == [True] and (workspace / "calc.py").read_text() == RIGHT
    assert result.outcome.answer.endswith(
        "Verification: the agent's own test run passed (gaffer ran no check)"
    )  # type: ignore[union-attr]
    model.assert_used_up()


def test_a_test_run_that_hangs_fails_at_its_deadline_and_fresh_attempts_follow(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gaffer's run after the write hangs and is killed at its deadline; the model's own
    run of the same command, given no deadline, is given that one, not the shell's."""
    monkeypatch.setattr(tests_after_writes, "TEST_RUN_DEFAULT_S", 2)
    script = fixed_afresh(HANGS)
    script.insert(2, call("run_shell", command=TEST_RUN))
    result, recorder, model = run(workspace, script)

    hung, own, sample = shell_runs(recorder)
    assert hung["facts"]["timed_out"] and hung["is_error"] and hung["elapsed_s"] < 30
    assert "timed out after 2s" in told(recorder, "tests_after_write")[0]
    assert own["args"] == {"command": TEST_RUN, "timeout": 2} and own["facts"]["timed_out"]
    assert sample["tool_call_id"] == "fresh1-4-test" and not sample["is_error"]
    assert (workspace / "calc.py").read_text() == RIGHT
    assert result.outcome.answer.endswith(
        "Verification: the agent's own test run passed (gaffer ran no check)"
    )  # type: ignore[union-attr]
    model.assert_used_up()


def test_the_models_own_test_run_is_given_the_deadline_fitted_to_the_suite(
    workspace: Path,
) -> None:
    tested = call("run_shell", command=TEST_RUN)
    script = [call("read_file", path="calc.py"), say(block(RIGHT)), tested, say("I fixed add.")]
    _, recorder, model = run(workspace, script)

    gaffers, own = shell_runs(recorder)
    assert gaffers["args"]["timeout"] == TEST_RUN_DEFAULT_S
    assert own["args"] == {"command": TEST_RUN, "timeout": TEST_RUN_MIN_S}, "fitted, not 120 s"
    model.assert_used_up()


def test_a_run_of_its_own_that_hung_starts_fresh_attempts_like_a_failing_one(
    workspace: Path,
) -> None:
    """The task names no command: the model ran the tests itself and they hung. The
    samples are judged by that command, at the deadline it hung at."""
    hangs = call("run_shell", command=TEST_RUN, timeout=2)
    hangs = AssistantTurn(text=block(HANGS), tool_calls=hangs.tool_calls, usage=hangs.usage)
    script = [call("read_file", path="calc.py"), hangs, *fixed_afresh(HANGS)[2:]]
    result, recorder, model = run(workspace, script, "Fix add in calc.py. Run the tests.")

    own, sample = shell_runs(recorder)
    assert own["facts"]["timed_out"] and told(recorder, "tests_after_write") == []
    assert sample["tool_call_id"] == "fresh1-3-test"
    assert sample["args"] == {"command": TEST_RUN, "timeout": 2} and not sample["is_error"]
    assert (workspace / "calc.py").read_text() == RIGHT
    assert result.outcome.answer.endswith(
        "Verification: the agent's own test run passed (gaffer ran no check)"
    )  # type: ignore[union-attr]
    model.assert_used_up()


def test_code_that_passed_is_not_lost_to_a_later_write(workspace: Path) -> None:
    """The tests pass; nudged, the model writes new code that fails them. The files go
    back to how they were at the passing run, the tests run again, and it is told so."""
    script = [
        call("read_file", path="calc.py"),
        say(block(RIGHT)),
        say(block(WRONG)),
        say("I fixed add."),
    ]
    result, recorder, model = run(workspace, script)
    assert (workspace / "calc.py").read_text() == RIGHT
    ids = [r["tool_call_id"] for r in shell_runs(recorder)]
    assert ids == ["tests-2", "tests-3", "passed-3"]
    [back] = [t for t in told(recorder, "tests_after_write") if t.startswith("Your change")]
    assert "gaffer put calc.py back as they were when they passed" in back and "1 passed" in back
    assert result.outcome.answer.endswith(
        "Verification: the agent's own test run passed (gaffer ran no check)"
    )  # type: ignore[union-attr]
    model.assert_used_up()


def test_without_kept_tests_a_later_write_stands(workspace: Path) -> None:
    task = f"Fix add in calc.py, and add a test for it. Run the tests with: {TEST_RUN}"
    script = [call("read_file", path="calc.py"), say(block(RIGHT)), say(block(WRONG))]
    script += [say("The tests fail."), say("The tests fail."), say("The tests fail.")]
    run(workspace, script, task)
    assert (workspace / "calc.py").read_text() == WRONG
