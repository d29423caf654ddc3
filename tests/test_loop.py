"""The agent loop against a scripted model: answers, batches, model mistakes and every stop."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from tests.helpers import make_agent, run_script, tool_messages
from workers.calls import MAX_CALLS_PER_REPLY
from workers.guards.editing import EditGuard
from workers.guards.repetition import RepetitionGuard
from workers.limits import Budget, Limits
from workers.log.events import Recorder
from workers.loop import WRAP_UP, WRAP_UP_AGAIN, run_agent
from workers.model import AssistantTurn, Message, ModelError, ToolCall, Usage, written_call
from workers.model.scripted import ScriptedModel, call, calls, say
from workers.outcome import Aborted, Failed, Finished, LimitHit
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import ToolResult

WRITE = {"path": "new.txt", "content": "made after the warning\n"}


def test_final_answer_without_tools(workspace: Path) -> None:
    result, recorder, _ = run_script(workspace, [say("All done.")])
    assert result.outcome == Finished("All done.")
    assert [r["event"] for r in recorder.records] == [
        "agent_start",
        "turn_start",
        "llm_call",
        "agent_end",
    ]
    assert recorder.of("agent_end")[0]["status"] == "completed"


def test_parallel_batch_is_answered_in_the_same_turn_by_id(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "b.txt").write_text("beta\n")
    batch = calls(("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"}))
    result, _, model = run_script(workspace, [batch, say("read both")])
    assistant = result.messages[2]
    assert assistant["role"] == "assistant"
    assert [c["id"] for c in assistant["tool_calls"]] == [c.id for c in batch.tool_calls]
    answers = tool_messages(result)
    assert [m["tool_call_id"] for m in answers] == [c.id for c in batch.tool_calls]
    assert answers[0]["content"] == "alpha\n" and answers[1]["content"] == "beta\n"
    # The second model call saw the assistant turn verbatim followed by both results.
    assert model.seen[1][2:] == result.messages[2:5]


def test_malformed_json_arguments_become_an_error_result_and_the_run_goes_on(
    workspace: Path,
) -> None:
    result, recorder, _ = run_script(
        workspace, [calls(("read_file", '{"path": "a.txt"')), say("ok")]
    )
    answer = tool_messages(result)[0]["content"]
    assert answer.startswith("error: the arguments for read_file are not valid JSON")
    assert '"path": <string>' in answer
    assert result.outcome == Finished("ok")
    line = recorder.of("tool_call")[0]
    assert line["is_error"] is True and line["args"] == '{"path": "a.txt"'


def test_unknown_tool_lists_the_real_ones(workspace: Path) -> None:
    result, _, _ = run_script(workspace, [call("delete_everything"), say("ok")])
    answer = tool_messages(result)[0]["content"]
    assert "unknown tool 'delete_everything'" in answer and "read_file" in answer
    assert "file's name" not in answer


def test_a_call_named_after_a_file_is_told_the_call_it_meant(workspace: Path) -> None:
    """The bundled model checked a first answer's lines by calling `core.py`, one a line,
    and again when told only that no such tool exists."""
    result, _, _ = run_script(workspace, [call("src/core.py"), call("core.py"), say("ok")])
    for message in tool_messages(result):
        name = "src/core.py" if "src/" in message["content"] else "core.py"
        meant = f'call {{"name": "read_file", "arguments": {{"path": "{name}"}}}}.'
        assert message["content"].endswith(
            f"{name!r} is a file's name, not a tool's: to read it, {meant}"
        )


def test_a_call_named_after_a_file_with_a_name_to_find_runs_as_find_symbol(
    workspace: Path,
) -> None:
    """Shown a find_symbol call to check each first-answer line, the bundled model put
    each line's file where the tool goes (`core.py` with {"name": "Context"}): that is
    find_symbol, said so, and its result counts as find_symbol's for the guards."""
    from workers.repo_map.tool import find_symbol_tool

    (workspace / "core.py").write_text("class Context:\n    pass\n")
    tools = {**BUILTIN_TOOLS, "find_symbol": find_symbol_tool(workspace)}
    script = [calls(("core.py", {"name": "Context"}), ("core.py", {"path": "x"})), say("ok")]
    result, recorder, _ = run_script(workspace, script, tools=tools)
    meant, other = (m["content"] for m in tool_messages(result))
    ran = '{"name": "find_symbol", "arguments": {"name": "Context"}}'
    assert meant.startswith(f"['core.py' is a file's name, not a tool's: taken as {ran}]\n")
    assert "core.py:1 class Context" in meant
    assert other.startswith("error: unknown tool 'core.py'"), "other arguments: told, not run"
    assert [c["name"] for c in recorder.of("tool_call")] == ["find_symbol", "core.py"]


def test_wrong_and_missing_arguments(workspace: Path) -> None:
    result, _, _ = run_script(
        workspace, [call("read_file", file="a.txt"), call("read_file", path=3), say("ok")]
    )
    missing, wrong_type = (m["content"] for m in tool_messages(result))
    assert "invalid arguments for read_file" in missing and "path: Field required" in missing
    assert "file: Extra inputs are not permitted" in missing
    assert "path: Input should be a valid string" in wrong_type


def test_an_exception_inside_a_tool_is_an_observation(workspace: Path) -> None:
    def broken(*_args: object) -> object:
        raise RuntimeError("disk on fire")

    tools = {
        **BUILTIN_TOOLS,
        "list_dir": dataclasses.replace(BUILTIN_TOOLS["list_dir"], run=broken),
    }
    result, _, _ = run_script(workspace, [call("list_dir"), say("ok")], tools=tools)
    assert (
        "list_dir failed unexpectedly: RuntimeError: disk on fire"
        in tool_messages(result)[0]["content"]
    )
    assert result.outcome == Finished("ok")


def test_step_limit_stops_with_a_wrap_up_turn(workspace: Path) -> None:
    script = [call("list_dir", path="."), call("list_dir", path="./"), say("partial summary")]
    result, recorder, model = run_script(workspace, script, Limits(max_steps=3))
    assert result.outcome == LimitHit("steps", "used all 3 steps", answer="partial summary")
    assert model.seen[2][-1] == {"role": "user", "content": WRAP_UP.format(task="task")}
    assert recorder.of("limit")[0]["limit"] == "steps"
    assert recorder.of("agent_end")[0]["status"] == "limit"


def test_the_wrap_up_restates_a_numbered_task_whole_and_asks_for_its_form(
    workspace: Path,
) -> None:
    """Cut to 300 characters and told "in plain sentences", the bench's worker kept three
    of its ten questions and answered in prose what the task asked as a numbered list."""
    task = "Reply as a numbered list, one line per question.\n" + "\n".join(
        f"{n}. Which file defines the thing number {n} of this survey?" for n in range(1, 11)
    )
    model = ScriptedModel([call("list_dir"), say("1. a.py")])
    agent = make_agent(workspace, model, Recorder(), Limits(max_steps=2))
    run_agent(agent, [{"role": "system", "content": "sys"}, {"role": "user", "content": task}])
    wrap_up = str(model.seen[1][-1]["content"])
    assert wrap_up.endswith("The task was: " + task), "every part, on its own line"
    assert "in the form the task asks for" in wrap_up and "plain sentences" not in wrap_up


def test_a_readers_answer_with_tools_off_begins_at_its_first_numbered_item(
    workspace: Path,
) -> None:
    """After the local model's answer opening ("From what I found:") a bench reader wrote
    its calls out as text, asked twice, and gave no answer after minutes of reading: a
    reader's numbered questions have its answer begun at the first one's number. An agent
    that may write is not (its answer may begin with a file); nor is a task of one part,
    or one whose numbered lines are rules."""
    task = "4. Which file defines Context?\n5. Which file draws the bar?"
    read_only = {n: t for n, t in BUILTIN_TOOLS.items() if t.read_only}
    for tools, asked, begins in (
        (read_only, task, "4. "),
        (dict(BUILTIN_TOOLS), task, ""),
        (read_only, "Which file defines Context?", ""),
        (read_only, "Survey the loop. Keep to:\n1. brief\n2. cite files", ""),
    ):
        model = ScriptedModel([call("list_dir"), say("4. core.py")])
        agent = make_agent(workspace, model, Recorder(), Limits(max_steps=2), tools=tools)
        run_agent(agent, [{"role": "system", "content": "sys"}, {"role": "user", "content": asked}])
        assert model.paused == [False, True] and model.answer_begins == ["", begins]


def test_step_limit_when_the_model_ignores_the_wrap_up(workspace: Path) -> None:
    script = [call("list_dir", path="."), call("list_dir", path="./"), say("Listed the root.")]
    result, recorder, model = run_script(workspace, script, Limits(max_steps=2))
    assert result.outcome == LimitHit("steps", "used all 2 steps", answer="Listed the root.")
    assert model.seen[2][-1] == {"role": "user", "content": WRAP_UP_AGAIN}
    # The call made at the wrap-up never ran, yet it has an answer: the conversation stays valid.
    assert tool_messages(result)[-1]["content"].startswith("not run: tools are off")
    assert len(recorder.of("tool_call")) == 1


def test_a_tool_call_is_never_the_final_answer(workspace: Path) -> None:
    fenced = '```json\n{"name": "delegate", "arguments": {"profile": "explorer", "task": "x"}}\n```'
    script = [
        call("list_dir"),
        say(fenced),  # the wrap-up answered with a call written out, as the demo did
        say('read_file(path="a.py")'),
    ]
    result, _, _ = run_script(workspace, script, Limits(max_steps=2))
    assert isinstance(result.outcome, LimitHit)
    assert result.outcome.answer == ""
    assert "the model gave no answer, only tool calls" in result.outcome.detail


def test_a_call_written_as_text_mid_run_is_sent_back(workspace: Path) -> None:
    script = [say('{"name": "list_dir", "arguments": {"path": "."}}'), say("Nothing to do.")]
    result, recorder, _ = run_script(workspace, script)
    assert result.outcome == Finished("Nothing to do.")
    sent = [r for r in recorder.of("user_message") if r["source"] == "model_error"]
    assert sent and "tool call written as text" in sent[0]["content"]


def test_prose_that_mentions_json_is_an_answer() -> None:
    names = ["read_file", "delegate"]
    assert written_call('```json\n{"name": "read_file", "arguments": {}}\n```', names)
    assert written_call('read_file(path="a.py")', names)
    assert not written_call('The config is {"name": "x"}; read_file showed it.', names)
    assert not written_call('{"name": "Ada", "age": 3}', names)
    # The demo's explorer, its answer begun for it with tools off, wrote three calls.
    three = "".join(
        f'```json\n{{"name": "{n}", "arguments": {{}}}}\n```\n'
        for n in ("read_file", "grep", "grep")
    )
    assert written_call("From what I found:\n" + three, names)
    assert not written_call("From what I found:\nloop.py runs it.\n" + three, names)
    assert not written_call("From what I found:", names)
    # The requests reader's wrap-up: calls, empty fences, a call cut at the limit.
    cut = three + "```json\n```\n```json\n```\n" + three + '```json\n{"name": "find'
    assert written_call("From what I found:\n" + cut, names)
    assert not written_call("From what I found:\nloop.py runs it.\n" + cut, names)
    assert not written_call("```json\n```", names)
    # Data cut at the output limit, alone, is a cut answer, not a call.
    assert not written_call('```json\n{\n  "name": "my-app",\n  "version": "1', names)
    assert not written_call('Here it is:\n```json\n{"name": "Ada", "age"', names)


def test_token_budget_refuses_the_next_call(workspace: Path) -> None:
    heavy = AssistantTurn(
        tool_calls=call("list_dir").tool_calls, usage=Usage(900, 200), finish_reason="tool_calls"
    )
    result, recorder, model = run_script(workspace, [heavy, say("never")], Limits(max_tokens=1000))
    assert isinstance(result.outcome, LimitHit) and result.outcome.limit == "tokens"
    assert model.remaining == 1  # the second call was refused, not made
    assert len(recorder.of("llm_call")) == 1


def test_wall_clock_stops_the_run(workspace: Path) -> None:
    def slow(_messages: list[Message]) -> AssistantTurn:
        time.sleep(0.3)
        return call("list_dir", path=str(time.monotonic()))

    result, recorder, _ = run_script(workspace, [slow] * 10, Limits(max_seconds=0.5))
    assert isinstance(result.outcome, LimitHit) and result.outcome.limit == "time"
    assert recorder.of("agent_end")[0]["status"] == "timeout"
    assert len(recorder.of("llm_call")) <= 3


def test_an_agent_with_time_for_one_call_only_answers_with_tools_off(workspace: Path) -> None:
    """Its calls take 0.5 s for 256 reply tokens, so a step and an answer take about
    1.2 s (workers/pace.py), and 2 s are allowed: after the second, they would not fit,
    so the third reply is the answer, asked for with tools off (a call the deadline cuts
    gives nothing)."""
    script = [call("list_dir", path="."), call("list_dir", path="workers"), say("what I had")]
    model = ScriptedModel(
        [dataclasses.replace(turn, usage=Usage(10, 256)) for turn in script], latency=0.5
    )
    recorder = Recorder()
    agent = make_agent(workspace, model, recorder, Limits(max_seconds=2.0))
    result = run_agent(agent, [{"role": "user", "content": "survey it"}])

    assert result.outcome == Finished("what I had")
    assert model.paused == [False, False, True]
    assert "Tools are paused for this reply" in model.seen[2][-1]["content"]


def test_repetition_is_refused_then_ends_the_run(workspace: Path) -> None:
    same = [call("list_dir", path="src") for _ in range(5)]
    result, recorder, model = run_script(workspace, [*same, say("There is no src folder.")])
    answers = [m["content"] for m in tool_messages(result)]
    assert answers[0].startswith("error: no such folder")
    assert answers[1].startswith("not run: you just made this call to list_dir")
    assert answers[2].startswith("refused: this is call 3 in a row to list_dir")
    assert answers[3].startswith("not run")
    assert isinstance(result.outcome, LimitHit) and result.outcome.limit == "repetition"
    # Stopped, it is still asked what it found (tools off): the fifth call is not run.
    assert result.outcome.answer == "There is no src folder."
    model.assert_used_up()
    assert [r["is_error"] for r in recorder.of("tool_call")] == [True] * 4


def test_repetition_counts_only_in_a_row(workspace: Path) -> None:
    script = [
        call("list_dir"),
        call("list_dir"),
        call("find_files", pattern="*"),
        call("list_dir"),
        call("list_dir"),
        say("ok"),
    ]
    result, _, _ = run_script(workspace, script)
    assert result.outcome == Finished("ok")


def test_model_error_fails_the_run_with_its_reason(workspace: Path) -> None:
    result, recorder, _ = run_script(
        workspace, [ModelError("auth", "the endpoint refused the API key (401)")]
    )
    assert result.outcome == Failed("the endpoint refused the API key (401)", kind="auth")
    assert recorder.of("agent_end")[0]["status"] == "failed"


def test_cancel_stops_before_the_next_call(workspace: Path) -> None:
    budget = Budget()

    def cancel_now(_messages: list[Message]) -> AssistantTurn:
        budget.cancel()
        return call("list_dir")

    model = ScriptedModel([cancel_now, say("never")])
    recorder = Recorder()
    agent = make_agent(workspace, model, recorder)
    agent.budget = budget
    result = run_agent(agent, [{"role": "user", "content": "task"}])
    assert result.outcome == Aborted("cancelled")
    assert recorder.of("agent_end")[0]["status"] == "cancelled"
    assert model.remaining == 1


def test_keyboard_interrupt_during_a_tool_is_an_abort_with_answered_calls(workspace: Path) -> None:
    def interrupted(*_args: object) -> object:
        raise KeyboardInterrupt

    tools = {
        **BUILTIN_TOOLS,
        "list_dir": dataclasses.replace(BUILTIN_TOOLS["list_dir"], run=interrupted),
    }
    result, _, _ = run_script(workspace, [call("list_dir"), say("never")], tools=tools)
    assert result.outcome == Aborted("interrupted by the user")
    assert tool_messages(result)[0]["content"] == "not run: interrupted by the user"


def test_events_carry_what_the_log_needs(workspace: Path) -> None:
    (workspace / "a.txt").write_text("x\n")
    _, recorder, _ = run_script(workspace, [call("read_file", path="a.txt"), say("done")])
    tool_line = recorder.of("tool_call")[0]
    assert tool_line["name"] == "read_file" and tool_line["args"] == {"path": "a.txt"}
    assert tool_line["sandbox"] == "host" and tool_line["is_error"] is False
    assert tool_line["elapsed_s"] >= 0 and tool_line["result_preview"] == "x\n"
    llm_line = recorder.of("llm_call")[0]
    assert {"prompt_tokens", "completion_tokens", "elapsed_s", "attempt"} <= llm_line.keys()
    assert all(r["session_id"] == "s1" and r["agent_id"] == "main" for r in recorder.records)


def test_an_identical_call_twice_in_one_batch_runs_once(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    batch = calls(
        ("read_file", {"path": "a.txt"}), ("read_file", {"path": "a.txt"}), ("list_dir", {})
    )
    result, _, _ = run_script(workspace, [batch, say("ok")])
    answers = [m["content"] for m in tool_messages(result)]
    assert answers[0] == "alpha\n" and answers[1].startswith(
        "not run: the same call as an earlier one"
    )
    assert len(answers) == 3 and result.outcome == Finished("ok")


def test_copies_in_one_batch_do_not_count_as_repetition(workspace: Path) -> None:
    batch = calls(*([("list_dir", {"path": "."})] * 5))
    result, _, _ = run_script(workspace, [batch, say("ok")])
    answers = [m["content"] for m in tool_messages(result)]
    assert sum(a.startswith("not run: the same call") for a in answers) == 4
    assert result.outcome == Finished("ok")


def test_calls_past_the_cap_are_seen_by_the_repetition_guard(workspace: Path) -> None:
    """A reply of more calls than one may make: those past the cap are answered, not run,
    and still count as the agent's own (the same refusal, again and again, is a circle)."""
    for n in range(MAX_CALLS_PER_REPLY + 6):
        (workspace / f"f{n}.txt").write_text("")  # each search finds its file
    flood = calls(*(("find_files", {"pattern": f"f{n}.*"}) for n in range(MAX_CALLS_PER_REPLY + 6)))
    result, recorder, _ = run_script(workspace, [flood, say("nothing there")])
    assert len(recorder.of("tool_call")) == MAX_CALLS_PER_REPLY, "the rest are answered, not run"
    nudges = [r for r in recorder.of("user_message") if r["source"] == "repetition"]
    assert len(nudges) == 1 and "the same error came back" in nudges[0]["content"]
    assert result.outcome == Finished("nothing there")


def test_once_warned_the_call_that_goes_round_again_ends_the_batch_there(
    workspace: Path,
) -> None:
    """The same error after a warning ends the run at that call: the rest of its batch is
    answered as not run, and writes nothing (the run ends with `repetition` either way)."""
    failing = [call("read_file", path=f"gone{n}.txt") for n in range(3)]
    last = calls(("read_file", {"path": "gone3.txt"}), ("write_file", WRITE))
    result, _, _ = run_script(workspace, [*failing, last, say("never")], edits=EditGuard(workspace))
    assert isinstance(result.outcome, LimitHit) and result.outcome.limit == "repetition"
    assert not (workspace / "new.txt").exists(), "the call after the stop did not run"
    answers = [m["content"] for m in tool_messages(result)]
    assert answers[-1].startswith("not run: "), answers[-1]


def test_an_unreadable_reply_is_sent_back_to_the_model(workspace: Path) -> None:
    garbled = ModelError(
        "malformed_output", "the endpoint could not read the model's reply: bad JSON"
    )
    result, recorder, _ = run_script(workspace, [garbled, say("ok")])
    assert result.outcome == Finished("ok")
    told = [r for r in recorder.of("user_message") if r["source"] == "model_error"]
    assert len(told) == 1 and "could not be read" in told[0]["content"]


def test_a_cycle_of_three_calls_gets_one_nudge_then_ends_with_repetition(
    workspace: Path,
) -> None:
    """What a small coder did: a failing edit, an edit that re-inserts the block, the
    same failing test run, and round again."""
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    cycle = [
        call("edit_file", path="calc.py", old_text="return a + b", new_text="return a - b"),
        call("write_file", path="calc.py", content="def add(a, b):\n    return a - b\n"),
        call("run_shell", command="exit 1"),
    ]
    script = [dataclasses.replace(turn) for _ in range(4) for turn in cycle] + [say("never")]
    result, recorder, model = run_script(workspace, script)
    assert isinstance(result.outcome, LimitHit) and result.outcome.limit == "repetition"
    assert "after a warning, still your last 3 calls repeat" in result.outcome.detail
    nudges = [r for r in recorder.of("user_message") if r["source"] == "repetition"]
    assert len(nudges) == 1
    assert nudges[0]["content"].startswith("You are going in circles: your last 3 calls repeat")
    assert "- edit_file" in nudges[0]["content"] and "- run_shell" in nudges[0]["content"]
    assert len(recorder.of("tool_call")) == 7, "it ran one more call of the cycle, then stopped"
    # Asked twice for an answer with tools off, it only made calls: no answer.
    assert result.outcome.answer == "" and "gave no answer" in result.outcome.detail
    assert model.remaining == 4


def test_a_reader_listing_the_same_folders_round_again_is_nudged_then_stopped(
    workspace: Path,
) -> None:
    """What the demo's supervisor did: it listed six folders, then the same six again in
    another order, then again: nineteen steps for nothing new."""
    for name in ("a", "b", "c", "d"):
        (workspace / name).mkdir()
    first = [call("list_dir", path=name) for name in ("a", "b", "c", "d")]
    again = [call("list_dir", path=name) for name in ("b", "a", "d", "c")]
    script = [*first, *again, say("a, b, c and d are empty.")]
    result, recorder, model = run_script(workspace, script)
    nudges = [r for r in recorder.of("user_message") if r["source"] == "repetition"]
    assert len(nudges) == 1
    assert nudges[0]["content"].startswith(
        "You are going in circles: 3 of your calls repeat earlier ones, with the same results:"
    )
    assert "Answer every part of the task now" in nudges[0]["content"], "tools paused"
    assert '- list_dir {"path": "d"}' in nudges[0]["content"]
    assert [m["role"] for m in model.seen[7][-2:]] == ["tool", "user"], "after the 7th call"
    assert isinstance(result.outcome, LimitHit) and result.outcome.limit == "repetition"
    assert result.outcome.answer == "a, b, c and d are empty."


def test_a_reader_searching_word_by_word_and_finding_nothing_is_nudged(
    workspace: Path,
) -> None:
    """The bench's click worker searched file names for "defin", "object", "hold",
    "state"… thirteen times, finding nothing, until its step limit."""
    (workspace / "core.py").write_text("class Context:\n    pass\n")
    words = ("defin", "object", "hold", "state", "one")
    script = [*(call("find_files", pattern=w) for w in words[:4]), say("1. core.py")]
    result, recorder, model = run_script(workspace, script)
    nudges = [r for r in recorder.of("user_message") if r["source"] == "repetition"]
    assert len(nudges) == 1
    assert "your last 4 searches found nothing" in nudges[0]["content"]
    assert model.paused[-1], "its next reply is asked for with tools off"
    assert result.outcome == Finished("1. core.py")
    found = [call("find_files", pattern=w) for w in ("defin", "object", "hold", "core")]
    _, recorder, _ = run_script(workspace, [*found, say("core.py")])
    assert not [r for r in recorder.of("user_message") if r["source"] == "repetition"]


def test_an_editor_may_read_again_what_it_read_before(workspace: Path) -> None:
    (workspace / "calc.py").write_text("x = 1\n")
    read, look, find = (
        call("read_file", path="calc.py"),
        call("list_dir"),
        call("find_files", pattern="*"),
    )
    reads = [read, look, find, dataclasses.replace(read), dataclasses.replace(find)]
    reads.append(dataclasses.replace(look))
    result, recorder, _ = run_script(workspace, [*reads, say("ok")], edits=EditGuard(workspace))
    assert not [r for r in recorder.of("user_message") if r["source"] == "repetition"]
    assert result.outcome == Finished("ok")


def test_the_same_error_three_times_gets_a_nudge_and_a_fourth_ends_the_run(
    workspace: Path,
) -> None:
    missing = call("read_file", path="gone.py")
    script = [
        missing,
        call("list_dir"),
        dataclasses.replace(missing),
        call("find_files", pattern="*.py"),
        dataclasses.replace(missing),
        call("grep", pattern="x"),
        dataclasses.replace(missing),
        say("never"),
    ]
    result, recorder, _ = run_script(workspace, script)
    nudges = [r for r in recorder.of("user_message") if r["source"] == "repetition"]
    assert len(nudges) == 1 and "the same error came back 3 times" in nudges[0]["content"]
    # Paused, a reader answers the whole task, from what it saw and the workspace's
    # layout in its instructions (a small model otherwise answers about one folder).
    assert "Answer every part of the task now" in nudges[0]["content"]
    assert "the workspace at a glance in your instructions" in nudges[0]["content"]
    assert isinstance(result.outcome, LimitHit) and result.outcome.limit == "repetition"
    assert len(recorder.of("tool_call")) == 7


def test_a_nudged_agent_that_changes_course_finishes(workspace: Path) -> None:
    missing = call("read_file", path="gone.py")
    script = [
        missing,
        call("list_dir"),
        dataclasses.replace(missing),
        call("find_files", pattern="*.py"),
        dataclasses.replace(missing),
        call("list_dir", path="."),
        say("gone.py does not exist"),
    ]
    result, _, _ = run_script(workspace, script)
    assert result.outcome == Finished("gone.py does not exist")


def test_after_a_refused_repeat_the_next_reply_is_asked_for_without_tools(
    workspace: Path,
) -> None:
    same = [call("list_dir", path=".") for _ in range(3)]
    result, _, _ = run_script(workspace, [*same, say("```json\nThe workspace is empty.")])
    assert result.outcome == Finished("The workspace is empty.")
    assert "Tools are paused for your next reply" in tool_messages(result)[2]["content"]


def test_replies_that_cannot_be_read_four_times_in_a_row_end_the_agent(workspace: Path) -> None:
    unreadable = ModelError("malformed_output", "Failed to parse tool call arguments as JSON")
    result, recorder, model = run_script(workspace, [unreadable] * 4 + [say("never")])
    assert isinstance(result.outcome, Failed) and result.outcome.kind == "malformed_output"
    assert model.remaining == 1
    assert len([r for r in recorder.of("user_message") if r["source"] == "model_error"]) == 3


def test_an_agent_that_writes_blocks_is_told_how_when_it_repeats_itself() -> None:
    guard = RepetitionGuard(pauses=False, hint="Write it as a block.")
    key = ("read_file", '{"path": "a.py"}')
    assert guard.check("read_file", key) is None
    refused = guard.check("read_file", key)
    assert refused is not None and refused.output.endswith("final answer. Write it as a block.")


def test_a_repeated_batch_of_eleven_calls_is_a_cycle() -> None:
    guard = RepetitionGuard(pauses=True)
    batch = [
        ToolCall(id=f"c{i}", name="grep", arguments=f'{{"pattern": "p{i}"}}') for i in range(11)
    ]
    for call_ in batch * 2:
        guard.observe(call_, ToolResult(output="no matches"))
    nudge = guard.take_nudge()
    assert nudge is not None and "your last 11 calls repeat the 11 before them" in nudge


def test_a_cycle_found_twice_in_one_batch_is_warned_before_it_ends_the_run() -> None:
    """What a small coder did, in batches: read both files and test; read and test; read
    and test. The cycle shows at the first call of the third batch and again at its
    second, before the model saw a word of warning."""
    guard = RepetitionGuard(pauses=False)
    code = ToolCall(id="r", name="read_file", arguments='{"path": "stats.py"}')
    tests = ToolCall(id="u", name="read_file", arguments='{"path": "test_stats.py"}')
    run_them = ToolCall(id="t", name="run_shell", arguments='{"command": "pytest"}')
    for batch in ([code, tests, run_them], [code, run_them], [code, run_them]):
        assert guard.take_nudge() is None
        for call_ in batch:
            guard.observe(call_, ToolResult(output="same"))
    assert guard.stop is None, "the warning was not shown yet"
    assert (nudge := guard.take_nudge()) is not None and "your last 2 calls" in nudge
    for call_ in [code, run_them]:
        guard.observe(call_, ToolResult(output="same"))
    assert guard.stop is not None and "after a warning" in guard.stop.detail


def test_a_scripted_model_says_when_turns_were_never_asked_for(workspace: Path) -> None:
    _, _, model = run_script(workspace, [say("done"), say("never asked for")])
    with pytest.raises(AssertionError, match="1 scripted turn"):
        model.assert_used_up()
    assert [len(t) for t in model.tools_seen] == [len(model.tools_seen[0])], "tools it offered"
