"""A block writer stuck on a failing test gets fresh samples of the change, from the
files as they were; one that passes the tests is kept, the others are taken back
(workers/aids/fresh_attempts.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from supervisor.resume import rebuild
from tests.helpers import run_editor
from workers.agent import AgentResult
from workers.aids.fresh_ask import fitted_cap
from workers.aids.fresh_attempts import FRESH_TEMPERATURE, MAX_FRESH_ATTEMPTS
from workers.aids.python_merge import definitions, merge, with_what_it_uses
from workers.check.choose import named_command
from workers.guards.test_runs import failed_tests
from workers.log.events import Recorder
from workers.model import AssistantTurn, Message, ModelError
from workers.model.scripted import ScriptedModel, call, say

ORIGINAL = "def add(a, b):\n    return a - b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
TEST_RUN = f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"


def block(body: str, path: str = "calc.py") -> str:
    return f"{path}\n```python\n{body}```"


AGENTS = "def add(a, b):\n    return a * b\n"  # the agent's own fix, which fails
WRONG = "def add(a, b):\n    return b - a\n"
RIGHT = "def add(a, b):\n    return a + b\n"


def failed_fix(*then: object, reads: tuple[str, ...] = ("calc.py",)) -> list[object]:
    """The agent reads `reads`, writes its own fix and runs the tests (they fail), then `then`."""
    fix = call("run_shell", command=TEST_RUN)
    fix = AssistantTurn(text=block(AGENTS), tool_calls=fix.tool_calls, usage=fix.usage)
    return [*(call("read_file", path=p) for p in reads), fix, *then]


def run(
    workspace: Path,
    script: list[object],
    # Names no command ("with pytest" would: see the named-command tests below), so the
    # samples are judged by the agent's own failing run.
    task: str = "Fix add in calc.py so that its tests pass.",
    files: tuple[str, str] = (ORIGINAL, TESTS),
) -> tuple[AgentResult, Recorder, ScriptedModel]:
    (workspace / "calc.py").write_text(files[0])
    (workspace / "test_calc.py").write_text(files[1])
    return run_editor(workspace, script, task)


def attempts(recorder: Recorder) -> list[tuple[bool, str]]:
    return [(r["kept"], r["reason"]) for r in recorder.records if r["event"] == "fresh_attempt"]


def test_a_stuck_agent_gets_fresh_samples_and_keeps_the_one_that_passes(workspace: Path) -> None:
    def right_after_the_wrong_one_was_taken_back(_messages: list[Message]) -> AssistantTurn:
        assert (workspace / "calc.py").read_text() == AGENTS, "the agent's own code, back"
        return say(block(RIGHT))

    stuck = [say("The tests fail.")]  # stuck on failing tests: samples at once
    samples = [say(block(WRONG)), right_after_the_wrong_one_was_taken_back]
    answer = say(block(AGENTS) + "\n\nI fixed add.")  # its own failing code, once more
    result, recorder, model = run(workspace, failed_fix(*stuck, *samples, answer))

    assert (workspace / "calc.py").read_text() == RIGHT
    assert attempts(recorder) == [
        (False, "the tests failed (exit 1); taken back"),
        (True, "the tests pass"),
    ]
    sample_prompt = model.seen[3][0]["content"]
    assert ORIGINAL in sample_prompt and AGENTS not in sample_prompt, "the files as they were"
    assert model.temperatures == [None] * 3 + [FRESH_TEMPERATURE] * 2 + [None]
    told = model.seen[5][-1]["content"]
    assert told.startswith("Your code still failed the tests, so gaffer asked for the change")
    assert "The tests pass now" in told and "1 passed" in told
    assert model.paused[-1], "the answer is asked for with tools off"
    said = result.outcome.answer  # type: ignore[union-attr]
    assert "I fixed add." in said and "a * b" not in said, "its code is neither written nor shown"
    assert said.endswith("Verification: the agent's own test run passed (gaffer ran no check)")
    model.assert_used_up()
    runs = [r for r in recorder.records if r["event"] == "tool_call" and r["name"] == "run_shell"]
    assert [r["tool_call_id"] for r in runs][1:] == ["fresh1-3-test", "fresh2-3-test"], (
        "each logged"
    )
    # A resume rebuilds the agent's conversation: the samples and their calls are not in it.
    rebuilt = rebuild([{**r, "agent_id": "supervisor"} for r in recorder.records])
    assert not any(block(WRONG) == m.get("content") for m in rebuilt.messages)
    assert sum(m["role"] == "tool" for m in rebuilt.messages) == 2


def test_samples_that_fail_leave_the_agents_work_and_its_evidence(workspace: Path) -> None:
    """Each sample is tried and taken back; one the model draws again is not tried again,
    and none of them counts as the agent going round."""
    wrong = [f"def add(a, b):\n    return a - b + {n}0\n" for n in range(1, MAX_FRESH_ATTEMPTS)]
    samples = [say(block(w)) for w in wrong] + [say(block(wrong[0]))]
    focused = say(block(AGENTS))  # the focused ask, after the samples: an echo
    script = [say("The tests fail."), *samples, focused, say("I could not fix it.")]
    script += [say("Still failing."), say("It cannot pass.")]
    result, recorder, model = run(workspace, failed_fix(*script))

    assert (workspace / "calc.py").read_text() == AGENTS
    tried = [(False, "the tests failed (exit 1); taken back")] * (MAX_FRESH_ATTEMPTS - 1)
    assert attempts(recorder) == [*tried, (False, "the same sample as an earlier one")]
    reasons = [r["reason"] for r in recorder.records if r["event"] == "verification"]
    assert reasons[-1].startswith("the last test run failed"), "the gate judges what is there"
    assert "Verification: unverified" in result.outcome.answer  # type: ignore[union-attr]
    assert not any(r["event"] == "limit" for r in recorder.records)
    model.assert_used_up()


def test_a_sample_is_written_over_the_files_as_they_were(workspace: Path) -> None:
    """Its blocks merge into the original file, not into the agent's failing one: a sample
    of one function leaves nothing of the agent's code behind."""
    broken = AGENTS + "\nBROKEN = 1 / 0\n"
    fix = call("run_shell", command=TEST_RUN)
    fix = AssistantTurn(text=block(broken), tool_calls=fix.tool_calls, usage=fix.usage)
    script = [call("read_file", path="calc.py"), fix, say("It fails."), say(block(broken))]
    result, _, _ = run(workspace, [*script, say(block(RIGHT)), say("Fixed.")])
    assert (workspace / "calc.py").read_text() == RIGHT
    assert result.outcome.answer.endswith(
        "Verification: the agent's own test run passed (gaffer ran no check)"
    )  # type: ignore[union-attr]


def test_a_sample_that_writes_tests_or_their_setup_is_never_written(workspace: Path) -> None:
    """A sample of nothing but test setup is not tried; one that copies the tests out
    after its code has its code tried, and the tests left as they are."""
    cheats = [
        block("collect_ignore = ['test_calc.py']\n", path="conftest.py"),
        block(RIGHT) + "\n\n" + block("def test_add():\n    pass\n", path="test_calc.py"),
    ]
    script = [say("The tests fail."), *(say(c) for c in cheats), say("Fixed.")]
    _, recorder, _ = run(workspace, failed_fix(*script, reads=("calc.py", "test_calc.py")))

    assert attempts(recorder) == [
        (False, "the sample writes conftest.py: not a file it was shown, or a test"),
        (True, "its blocks for test_calc.py left out (not a file it may write); the tests pass"),
    ]
    assert (workspace / "calc.py").read_text() == RIGHT
    assert (workspace / "test_calc.py").read_text() == TESTS
    assert not (workspace / "conftest.py").exists()
    runs = [r for r in recorder.records if r["event"] == "tool_call" and r["name"] == "run_shell"]
    assert [r["tool_call_id"] for r in runs][1:] == ["fresh2-4-test"], "only the second ran"
    written = [r["args"]["path"] for r in recorder.records if r.get("name") == "write_file"]
    assert "test_calc.py" not in written


def test_a_model_that_fails_mid_sampling_leaves_the_agent_as_it_was(workspace: Path) -> None:
    down = ModelError("server", "the server went away")
    script = [say("The tests fail."), down, say(block(AGENTS)), say("It still fails.")]
    then = [say("No block."), say("It cannot pass.")]
    result, recorder, _ = run(workspace, failed_fix(*script, *then))
    assert (workspace / "calc.py").read_text() == AGENTS
    assert attempts(recorder) == []
    assert "Verification: unverified" in result.outcome.answer  # type: ignore[union-attr]


def test_no_sample_is_drawn_before_a_test_has_failed(workspace: Path) -> None:
    script = [call("read_file", path="calc.py"), say("I would change add."), say("no block")]
    _, recorder, model = run(workspace, [*script, say("Done.")])
    assert attempts(recorder) == [] and FRESH_TEMPERATURE not in model.temperatures


def test_a_kept_sample_answered_with_a_call_ends_with_gaffers_account(workspace: Path) -> None:
    stuck = [say("The tests fail."), say(block(RIGHT))]
    result, _, _ = run(workspace, failed_fix(*stuck, call("run_shell", command=TEST_RUN)))
    said = result.outcome.answer  # type: ignore[union-attr]
    assert said.startswith("gaffer asked for the change afresh and kept sample 1, which passes")
    assert "wrote 32 bytes to calc.py" in said and said.endswith(
        "Verification: the agent's own test run passed (gaffer ran no check)"
    )
    assert (workspace / "calc.py").read_text() == RIGHT


def test_the_test_command_a_task_names() -> None:
    assert named_command("Fix it. Run the tests with: python3 -m pytest -q") == (
        "python3 -m pytest -q"
    )
    assert named_command("Make it pass; check with `make test`.") == "make test"
    assert named_command("Run: echo hi. Fix add with care: it is wrong.") is None


NO_TESTS = f"{sys.executable} -m pytest -q -p no:cacheprovider calc.py"  # collects nothing


def wrong_command_fix(code: str) -> AssistantTurn:
    run_it = call("run_shell", command=NO_TESTS)
    return AssistantTurn(text=block(code), tool_calls=run_it.tool_calls, usage=run_it.usage)


def test_code_that_passes_the_tasks_test_command_ends_the_run_unsampled(workspace: Path) -> None:
    """The agent ran a command that runs no test (`pytest calc.py`) and thinks it failed:
    gaffer runs the one its task names, on the agent's code, and the run ends there."""
    task = f"Fix add in calc.py. Run the tests with: {TEST_RUN}"
    script = [call("read_file", path="calc.py"), wrong_command_fix(RIGHT), say("It fails.")]
    script += [say("I changed add to add.")]
    result, recorder, model = run(workspace, script, task)
    assert attempts(recorder) == [] and FRESH_TEMPERATURE not in model.temperatures
    runs = [r for r in recorder.records if r["event"] == "tool_call" and r["name"] == "run_shell"]
    assert [(r["tool_call_id"], r["args"]["command"]) for r in runs][1:] == [
        ("fresh0-3-test", TEST_RUN)
    ]
    told = model.seen[-1][-1]["content"]
    assert told.startswith(f"gaffer ran the test command your task names, `{TEST_RUN}`")
    said = result.outcome.answer  # type: ignore[union-attr]
    assert (
        said
        == "I changed add to add.\n\nVerification: the agent's own test run passed (gaffer ran no check)"
    )


def test_samples_are_judged_by_the_tasks_test_command(workspace: Path) -> None:
    task = f"Fix add in calc.py. Run the tests with: {TEST_RUN}"
    script = [call("read_file", path="calc.py"), wrong_command_fix(AGENTS), say("It fails.")]
    script += [say(block(RIGHT)), say("Fixed.")]
    result, recorder, _ = run(workspace, script, task)
    assert attempts(recorder) == [(True, "the tests pass")]
    runs = [r for r in recorder.records if r["event"] == "tool_call" and r["name"] == "run_shell"]
    assert [r["args"]["command"] for r in runs] == [NO_TESTS, TEST_RUN, TEST_RUN]
    assert (workspace / "calc.py").read_text() == RIGHT
    assert result.outcome.answer.endswith(
        "Verification: the agent's own test run passed (gaffer ran no check)"
    )  # type: ignore[union-attr]


# Two functions, a test each: samples that each get one right can be joined.
TWO = "def add(a, b):\n    return 0\n\n\ndef sub(a, b):\n    return 0\n"
TWO_TESTS = TESTS + "\n\ndef test_sub():\n    from calc import sub\n\n    assert sub(5, 2) == 3\n"
ADD_RIGHT, ADD_WRONG = "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a * b\n"
SUB_RIGHT, SUB_WRONG = "def sub(a, b):\n    return a - b\n", "def sub(a, b):\n    return a + b\n"
TWO_TASK = "Fix add and sub in calc.py. Run the tests with pytest."


def test_two_failed_samples_that_each_pass_a_test_are_joined(workspace: Path) -> None:
    one = say(block(f"{ADD_RIGHT}\n\n{SUB_WRONG}"))  # fails test_sub
    two = say(block(f"{ADD_WRONG}\n\n{SUB_RIGHT}"))  # fails test_add
    script = failed_fix(say("The tests fail."), one, two, say("add and sub are fixed."))
    result, recorder, model = run(workspace, script, TWO_TASK, (TWO, TWO_TESTS))

    assert (workspace / "calc.py").read_text() == f"{ADD_RIGHT}\n\n{SUB_RIGHT}"
    assert attempts(recorder) == [
        (False, "the tests failed (exit 1); taken back"),
        (False, "the tests failed (exit 1); taken back"),
        (True, "sample 2 with add in calc.py from sample 1: the tests pass"),
    ]
    joined = [r for r in recorder.records if r["event"] == "fresh_attempt"][-1]
    assert joined["made_from"] == [2, 1] and joined["attempt"] == 2
    assert model.temperatures.count(FRESH_TEMPERATURE) == 2, "a join calls no model"
    said = result.outcome.answer  # type: ignore[union-attr]
    assert said.startswith("add and sub are fixed.") and said.endswith(
        "Verification: the agent's own test run passed (gaffer ran no check)"
    )
    model.assert_used_up()


def test_joins_that_fail_are_taken_back_and_none_is_tried_twice(workspace: Path) -> None:
    sub_other = "def sub(a, b):\n    return b - a\n"
    one = say(block(f"{ADD_RIGHT}\n\n{SUB_WRONG}"))  # fails test_sub
    two = say(block(f"{ADD_WRONG}\n\n{sub_other}"))  # fails both: sample 1 passes test_add
    # Sample 3 fails both and is sample 2's sub and sample 1's add joined: it is not
    # joined with either again, as every join it gives has been tried.
    three = say(block(f"{ADD_WRONG}\n\n{SUB_WRONG}"))
    again = [say(block(f"{ADD_WRONG}\n\n{SUB_WRONG}")) for _ in range(3)]  # not tried again
    focused = say(block(AGENTS))  # the focused ask, after the samples: an echo
    script = failed_fix(say("The tests fail."), one, two, three, *again, focused)
    script += [say("I could not fix it."), say("Still failing."), say("It cannot pass.")]
    result, recorder, _model = run(workspace, script, TWO_TASK, (TWO, TWO_TESTS))

    agents = TWO.replace("return 0", "return a * b", 1)
    assert (workspace / "calc.py").read_text() == agents, "the agent's own code, back"
    calls = [r["tool_call_id"] for r in recorder.records if r["event"] == "tool_call"]
    assert [c for c in calls if c.startswith("join")] == [
        "join1-3-1", "join1-3-test", "join2-3-1", "join2-3-test"
    ], "each join's calls have ids of their own"  # fmt: skip
    joins = [r for r in recorder.records if r["event"] == "fresh_attempt" and "made_from" in r]
    assert [(r["made_from"], r["reason"]) for r in joins] == [
        (
            [2, 1],
            "sample 2 with add in calc.py from sample 1: the tests failed (exit 1); taken back",
        ),
        (
            [2, 1],
            "sample 2 with sub in calc.py from sample 1: the tests failed (exit 1); taken back",
        ),
    ]
    assert "Verification: unverified" in result.outcome.answer  # type: ignore[union-attr]


def test_the_tests_a_failed_run_names() -> None:
    pytest_run = (
        "FAILED test_rle.py::TestRunLength::test_decode - ValueError: invalid literal\n"
        "ERROR test_x.py::test_setup\n2 failed, 1 passed in 0.02s"
    )
    assert failed_tests(pytest_run) == {
        "test_rle.py::TestRunLength::test_decode",
        "test_x.py::test_setup",
    }
    unittest_run = "FAIL: test_decode (test_rle.TestRunLength)\nERROR: test_a (t.T.test_a)\n"
    assert failed_tests(unittest_run) == {"test_rle.TestRunLength.test_decode", "t.T.test_a"}
    assert failed_tests("E   ModuleNotFoundError: No module named 'rle'") is None
    coloured = "\x1b[31mFAILED\x1b[0m test_a.py::\x1b[1mtest_b\x1b[0m - assert 1 == 2"
    assert failed_tests(coloured) == {"test_a.py::test_b"}
    not_imported = "ERROR: test_rle (unittest.loader._FailedTest.test_rle)\n"
    assert failed_tests(not_imported) is None, "a module that could not be imported"


def test_a_modules_definitions_by_name() -> None:
    source = "import os\n\n@cache\ndef a():\n    return 1\n\n\nclass B:\n    x = 1\n\nC = 3\n"
    assert definitions(source) == {
        "a": "@cache\ndef a():\n    return 1\n",
        "B": "class B:\n    x = 1\n",
    }
    assert definitions("def broken(:\n") == {}
    assert definitions("def a():\n    return '\x0c'\n\x0c\ndef b():\n    pass\n")["b"] == (
        "def b():\n    pass\n"
    ), "a form feed is not a line break"


def test_a_definition_comes_with_the_imports_and_helpers_it_uses() -> None:
    donor = (
        "import re\nfrom os import path\n\nPAIR = r'(\\d+)(.)'\nUNUSED = 1\n\n\n"
        "def _pairs(text):\n    return re.findall(PAIR, text)\n\n\n"
        "def decode(text):\n    return ''.join(c * int(n) for n, c in _pairs(text))\n\n\n"
        "def encode(text):\n    return text\n"
    )
    block = with_what_it_uses(donor, "decode")
    assert block is not None and "UNUSED" not in block and "def encode" not in block
    base = "def encode(text):\n    return 'x'\n\n\ndef decode(text):\n    return ''\n"
    joined = merge(base, block)
    namespace: dict[str, object] = {}
    exec(joined, namespace)  # the joined module must run as it stands
    assert namespace["decode"]("12w1b") == "w" * 12 + "b"  # type: ignore[operator]
    assert namespace["encode"]("a") == "x", "the base's own encode stays"  # type: ignore[operator]
    assert with_what_it_uses(donor, "PAIR") is None and with_what_it_uses("def (", "a") is None


def test_a_reply_sent_again_word_for_word_is_stuck_at_once(workspace: Path) -> None:
    """The held-out pattern: told its code fails, the model sends the same block and the
    same test run again (one blank line more). That reply is not paid for a third time:
    the agent is stuck there, and the samples start at its step."""
    again = failed_fix()[-1]
    again = AssistantTurn(text=again.text + "\n\n", tool_calls=again.tool_calls, usage=again.usage)
    script = failed_fix(again, say(block(RIGHT)), say("I fixed add."))
    result, recorder, model = run(workspace, script)

    calls = [r for r in recorder.records if r["event"] == "llm_call"]
    assert calls[2]["same_as"] == 2 and calls[3]["aside"] and calls[3]["step"] == 3
    assert attempts(recorder) == [(True, "the tests pass")]
    assert (workspace / "calc.py").read_text() == RIGHT
    said = result.outcome.answer  # type: ignore[union-attr]
    assert said.startswith("I fixed add.") and said.endswith(
        "Verification: the agent's own test run passed (gaffer ran no check)"
    )
    model.assert_used_up()


def test_a_sample_stops_where_a_copy_of_the_tests_would_begin(workspace: Path) -> None:
    """Its reply stops at a test file's path line over a block, and is capped at twice
    the size of what it may write; both are in the log. A sample whose code block never
    closed before the stop is still its code."""
    long_tests = TESTS + "".join(
        f"\n\ndef test_{n}():\n    assert add(0, {n}) == {n}\n" for n in range(40)
    )
    unclosed = "calc.py\n```python\n" + RIGHT + "\n\n"  # the server stopped at the tests
    stuck = [say("The tests fail."), say(unclosed), say("Fixed.")]
    script = failed_fix(*stuck, reads=("calc.py", "test_calc.py"))
    result, recorder, model = run(workspace, script, files=(ORIGINAL, long_tests))

    sampled = FRESH_TEMPERATURE
    asked = [i for i, t in enumerate(model.temperatures) if t == sampled]
    assert [model.stops[i] for i in asked] == [("test_calc.py\n```",)]
    assert [model.max_tokens[i] for i in asked] == [fitted_cap([ORIGINAL])] == [768]
    assert fitted_cap(["x" * 3000]) == 2200, "twice the file's tokens, and a sentence"
    logged = [r for r in recorder.records if r["event"] == "llm_call" and r.get("temperature")]
    assert logged[0]["stop"] == ["test_calc.py\n```"] and logged[0]["max_tokens"] == 768
    assert attempts(recorder) == [(True, "the tests pass")]
    assert (workspace / "calc.py").read_text() == RIGHT
    assert result.outcome.answer.endswith(
        "Verification: the agent's own test run passed (gaffer ran no check)"
    )  # type: ignore[union-attr]


def test_a_reply_said_again_after_an_aid_stepped_in_is_not_going_round(workspace: Path) -> None:
    """ "Running the tests." with the same test run, after the focused ask wrote new code,
    is the right next step, not the agent going round: it runs, and the run goes on."""
    running = call("run_shell", command=TEST_RUN)
    running = AssistantTurn(text="Running the tests.", tool_calls=running.tool_calls)
    wrong = [f"def add(a, b):\n    return a - b + {n}0\n" for n in range(1, MAX_FRESH_ATTEMPTS + 1)]
    script = [call("read_file", path="calc.py"), say(block(AGENTS)), running, running]
    script += [say(block(w)) for w in wrong]  # every sample fails
    script += [say(block(RIGHT)), running, say("I fixed add.")]  # the focused ask, then
    result, recorder, model = run(workspace, script, "Fix add in calc.py.")

    assert (workspace / "calc.py").read_text() == RIGHT
    told = [r["content"] for r in recorder.records if r.get("source") == "repetition"]
    assert len(told) == 1 and "word for word" in told[0], "warned once, at the first repeat"
    assert not any(r["event"] == "limit" for r in recorder.records)
    said = result.outcome.answer  # type: ignore[union-attr]
    assert said.startswith("I fixed add.") and said.endswith(
        "Verification: the agent's own test run passed (gaffer ran no check)"
    )
    model.assert_used_up()
