"""A block writer that stalls with a change to make is asked for it in a call of its own,
with the files in front of it (workers/aids/focused_write.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from supervisor.resume import rebuild
from tests.helpers import make_agent
from workers.agent import AgentResult
from workers.aids.focused_write import asks_for_change, prompt
from workers.guards.editing import EditGuard
from workers.guards.verification import Gate
from workers.limits import Budget
from workers.log.events import Emitter, Recorder
from workers.loop import run_agent
from workers.model import AssistantTurn, Message, Usage
from workers.model.scripted import ScriptedModel, call, say
from workers.sandbox.host import HostSandbox
from workers.tools.base import ToolContext, ToolResult

BUGGY = "def add(a, b):\n    return a - b\n"
FIX = "calc.py\n```python\ndef add(a, b):\n    return a + b\n```"
TESTS = "from calc import add\n\n\ndef test_add():\n    total = add(1, 2)\n    assert total == 3\n"


def conversation(task: str) -> list[Message]:
    return [{"role": "system", "content": "s"}, {"role": "user", "content": task}]


def run(
    workspace: Path,
    task: str,
    script: list[object],
    gate: Gate | None = None,
    recorder: Recorder | None = None,
) -> tuple[AgentResult, Recorder, ScriptedModel]:
    model = ScriptedModel(script)  # type: ignore[arg-type]
    recorder = recorder or Recorder()
    approved = HostSandbox(ToolContext(workspace, approve=lambda _c, _r: True))
    edits = EditGuard(workspace)
    agent = make_agent(workspace, model, recorder, edits=edits, file_blocks=True, gate=gate)
    agent.sandbox = approved  # the tests run
    return run_agent(agent, conversation(task)), recorder, model


def test_an_answer_with_the_change_still_to_make_gets_a_focused_ask(workspace: Path) -> None:
    (workspace / "calc.py").write_text(BUGGY)
    (workspace / "test_calc.py").write_text(TESTS)
    said = "I need to change add so that it adds. I will fix it."
    result, recorder, model = run(
        workspace,
        "Fix add in calc.py.",
        [call("read_file", path="calc.py"), say(said), say(FIX), call("list_dir"), say("done")],
    )
    assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    ask = model.seen[2]
    assert len(ask) == 1 and ask[0]["role"] == "user", "a prompt of its own"
    text = ask[0]["content"]
    assert text.startswith("Fix add in calc.py.\n\ncalc.py\n```python\ndef add(a, b):")
    assert f"What you said about it: {said}" in text
    assert text.endswith(
        'the rest of the file stays. Example:\n\nsettings.py\n```python\nGREETING = "Hello"\n```'
    )
    assert model.tools_seen[2] == [] and model.paused[2], "no tools offered"
    told = model.seen[3][-1]["content"]
    assert told.startswith("gaffer showed you the files as they are now and asked for the change")
    assert FIX in told and "wrote 32 bytes to calc.py" in told
    assert model.required[3], "the next reply is a call: the tests"
    asides = [r for r in recorder.records if r["event"] == "llm_call" and r.get("aside")]
    assert [a["text"] for a in asides] == [FIX]
    writes = [r for r in recorder.records if r["event"] == "tool_call" and r.get("from_block")]
    assert [(w["name"], w["args"]["path"]) for w in writes] == [("write_file", "calc.py")]
    sources = [r["source"] for r in recorder.records if r["event"] == "user_message"]
    assert sources == ["focused_write"]
    assert result.outcome.answer == "done"  # type: ignore[union-attr]
    # A resume rebuilds the conversation the agent had: the aside is not in it.
    rebuilt = rebuild([{**r, "agent_id": "supervisor"} for r in recorder.records])
    assert all(m.get("content") != FIX for m in rebuilt.messages if m["role"] == "assistant")
    assert any(str(m.get("content")).startswith("gaffer showed you") for m in rebuilt.messages)


def test_the_last_failure_is_shown_and_files_come_before_their_tests(workspace: Path) -> None:
    (workspace / "calc.py").write_text(BUGGY)
    (workspace / "test_calc.py").write_text(TESTS)
    tests = f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"
    read_both = call("read_file", path="test_calc.py")
    script = [read_both, call("read_file", path="calc.py"), call("run_shell", command=tests)]
    script += [say("The tests fail."), say(FIX), say("done")]
    _, _, model = run(workspace, "Make the tests pass.", script)
    text = model.seen[4][0]["content"]
    assert text.index("calc.py\n```python") < text.index("test_calc.py\n```python")
    failed = text[text.index("The last test run failed:") :]
    assert f"$ {tests}" in failed and "test_calc.py:6: AssertionError" in failed
    assert ">   6 |     assert total == 3" in failed


def test_a_question_gets_its_answer_and_nothing_is_written(workspace: Path) -> None:
    (workspace / "calc.py").write_text(BUGGY)
    answer = "add subtracts: it returns a - b."
    result, recorder, model = run(
        workspace,
        "Why does add give -1 for 1 and 2?",
        [call("read_file", path="calc.py"), say(answer)],
    )
    assert result.outcome.answer == answer  # type: ignore[union-attr]
    assert (workspace / "calc.py").read_text() == BUGGY
    model.assert_used_up()
    assert not any(r.get("aside") for r in recorder.records)


def test_a_focused_ask_that_writes_nothing_leaves_the_answer_as_it_was(workspace: Path) -> None:
    (workspace / "calc.py").write_text(BUGGY)
    echo = f"calc.py\n```python\n{BUGGY}```"
    result, _, model = run(
        workspace,
        "Fix add.",
        [call("read_file", path="calc.py"), say("It is fixed."), say(echo)],
    )
    assert result.outcome.answer == "It is fixed."  # type: ignore[union-attr]
    model.assert_used_up()


def test_it_asks_at_most_twice_in_a_run(workspace: Path) -> None:
    (workspace / "calc.py").write_text(BUGGY)
    nothing = say("I cannot.")
    script = [call("read_file", path="calc.py"), say("I would change add."), nothing]
    script += [say("See nothere.py."), nothing, say("Nothing more.")]
    recorder = Recorder()
    gate = Gate(Emitter([recorder]), max_send_backs=5, workspace=workspace, expects_change=True)
    result, recorder, _model = run(workspace, "Fix add.", script, gate=gate, recorder=recorder)
    assert sum(bool(r.get("aside")) for r in recorder.records) == 2
    assert [r["reason"] for r in recorder.records if r["event"] == "verification"] == [
        "no files changed",
        "your answer names nothere.py, which is not in the workspace",
        "no files changed",
    ], "each answer went to the gate after its ask wrote nothing"
    assert result.outcome.answer == "Nothing more."  # type: ignore[union-attr]


def test_a_block_writer_going_round_is_asked_for_the_change(workspace: Path) -> None:
    (workspace / "calc.py").write_text(BUGGY)
    read_it = call("read_file", path="calc.py")
    look = call("list_dir")
    script = [read_it, look, read_it, look, say(FIX), say("done")]
    result, _recorder, model = run(workspace, "Fix add in calc.py.", script)
    assert (workspace / "calc.py").read_text().endswith("a + b\n")
    assert model.seen[4][0]["content"].startswith("Fix add in calc.py.")
    told = [m["content"] for m in model.seen[5] if m["role"] == "user"][-2:]
    assert FIX in told[0], "what the ask wrote"
    assert told[1].startswith("You are going in circles"), "and the warning, all the same"
    assert result.outcome.answer == "done"  # type: ignore[union-attr]


def test_no_ask_is_made_once_the_budget_is_spent(workspace: Path) -> None:
    (workspace / "calc.py").write_text(BUGGY)
    spent = AssistantTurn(text="I would change add.", usage=Usage(100, 10))
    model = ScriptedModel([call("read_file", path="calc.py"), spent, say("never asked for")])
    agent = make_agent(workspace, model, Recorder(), edits=EditGuard(workspace), file_blocks=True)
    agent.budget = Budget(max_tokens=50)  # the second reply spends it
    run_agent(agent, conversation("Fix add."))
    assert model.remaining == 1, "no call after the budget was spent, an aside neither"


def test_what_a_task_asks_for() -> None:
    assert asks_for_change("Find the bug in stats.py and fix it.")
    assert asks_for_change("Customers should be able to use HALF. Add it.")
    assert not asks_for_change("Why does median give 2 for [1, 2, 3, 4]?")
    assert not asks_for_change("Survey this repository for a newcomer.")


def test_files_too_big_for_the_room_or_not_text_are_left_out(workspace: Path) -> None:
    (workspace / "big.py").write_text("x = 1\n" * 1000)
    (workspace / "blob.py").write_bytes(b"\xff\xfe\x00")
    (workspace / "calc.py").write_text(BUGGY)
    guard = EditGuard(workspace)
    for path in ("big.py", "blob.py", "calc.py"):
        guard.after("read_file", {"path": path}, ToolResult(output=""))
    asked = prompt("Fix add.", guard, "", "", room=1000)
    assert asked is not None and "calc.py\n```python" in asked[0]
    assert "big.py" not in asked[0] and "blob.py" not in asked[0]
    assert [path for path, _ in asked[1]] == ["calc.py"], "what is shown counts as read"
    assert prompt("Fix add.", EditGuard(workspace), "", "", room=1000) is None, "nothing read"


def test_what_the_model_said_is_its_prose_without_its_blocks(workspace: Path) -> None:
    (workspace / "constants.py").write_text("CM_PER_INCH = 2.45\n")
    guard = EditGuard(workspace)
    guard.after("read_file", {"path": "constants.py"}, ToolResult(output=""))
    said = (
        "From what I found: the factor is 2.54, not 2.45.\n\n"
        '```json\n{"name": "read_file", "arguments": {"path": "constants.py"}}\n```'
    )
    asked = prompt("Fix the inches.", guard, "", said, room=1000)
    assert asked is not None
    text = asked[0]
    assert "What you said about it: From what I found: the factor is 2.54, not 2.45.\n" in text
    assert '"name": "read_file"' not in text


def test_a_hostile_focused_reply_writes_nothing_outside_or_protected(workspace: Path) -> None:
    """The ask's blocks go through write_file like any others: out of the workspace and
    into git's hooks is refused, and nothing is written."""
    (workspace / "calc.py").write_text(BUGGY)
    (workspace / ".git" / "hooks").mkdir(parents=True)
    hostile = (
        "../escape.py\n```python\nprint('out')\n```\n\n"
        ".git/hooks/pre-commit.py\n```python\nimport os\n```"
    )
    result, recorder, _ = run(
        workspace,
        "Fix add.",
        [call("read_file", path="calc.py"), say("I would change add."), say(hostile)],
    )
    assert not (workspace.parent / "escape.py").exists()
    assert not (workspace / ".git" / "hooks" / "pre-commit.py").exists()
    writes = [r for r in recorder.records if r["event"] == "tool_call" and r.get("from_block")]
    assert writes and all(w["is_error"] for w in writes)
    assert result.outcome.answer == "I would change add."  # type: ignore[union-attr]
