"""A reply that loops on one phrase is ended where the loop begins, and no bad reply is asked
for again the same way (workers/model/runaway.py, workers/guards/replies.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from supervisor.runlog import render
from tests.fake_openai import FakeOpenAI, Reply
from tests.helpers import make_agent
from workers.guard_hooks import ModelAsk
from workers.guards.editing import EditGuard
from workers.guards.repetition import RepetitionGuard
from workers.guards.replies import ReplyGuard
from workers.log.events import Recorder
from workers.loop import run_agent
from workers.model import VARIED_TEMPERATURES, AssistantTurn, CallOptions, Message, ToolCall
from workers.model.openai_client import OpenAIModel
from workers.model.responses_client import ResponsesModel
from workers.model.runaway import MIN_RUN_CHARS, runaway
from workers.model.scripted import ScriptedModel, call, say
from workers.tools.base import ToolResult

PHRASE = '.replace("x", "")'
HEAD = "calc.py\n```python\ndef clean(s):\n    return s"
LOOPING = HEAD + PHRASE * 40 + "\n```\n"
"""What the bundled model wrote on a task nobody tuned for, until the output cap."""
PENALTIES = {"repeat_penalty": 1.1, "dry_multiplier": 0.8}


def test_code_is_no_runaway_and_a_loop_is_found_where_it_begins() -> None:
    board = "BOARD = [\n" + "    [0, 0, 0, 0, 0, 0, 0, 0, 0],\n" * 9 + "]\n"
    code = "def f(x):\n    return x + 1\n\n" * 3 + "# " + "=" * 78 + "\n" + board
    assert runaway(code) is None, "separators, a grid and a few like lines are code"
    loop = runaway(HEAD + PHRASE * 20)
    assert loop is not None and loop.unit == PHRASE and loop.repeats == 20
    assert (HEAD + PHRASE * 20)[: loop.keep] == HEAD + PHRASE, "the sound part and one copy"
    assert runaway(HEAD + PHRASE * (MIN_RUN_CHARS // len(PHRASE) - 1)) is None


SURVEY_LINES = [
    "- `workers/loop.py`: Contains the code for the loop, which is used to run the agents.",
    "- `workers/agent.py`: Contains the code for the agent, which is used to run the agents.",
    "- `workers/agent_view.py`: Contains the code for the agent view, for the aids.",
]


def test_an_answer_going_round_the_same_lines_is_ended_after_one_copy() -> None:
    """What the bundled model's demo answer did until its 768-token cap."""
    head = "From what I found:\n- `bench`: the benchmarks.\n"
    looping = head + "\n".join(SURVEY_LINES * 2 + SURVEY_LINES[:1]) + "\n"
    loop = runaway(looping)
    assert loop is not None and loop.repeats == 2
    assert looping[: loop.keep] == head + "\n".join(SURVEY_LINES) + "\n"
    assert runaway(looping.rstrip("\n")) is None, "a line still coming is not judged"
    assert runaway(head + "\n".join(SURVEY_LINES * 2) + "\n") is None, "twice may be a recap"
    fenced = "```python\n" + "\n".join(SURVEY_LINES * 3) + "\n"
    assert runaway(fenced) is None, "inside a code block like lines are the program's"
    rows = "grid:\n" + "    [0, 0, 0, 0, 0, 0, 0, 0, 0],\n" * 9
    assert runaway(rows) is None, "rows of a grid are one short line over again"


@pytest.mark.parametrize("responses", [False, True])
def test_a_reply_that_loops_on_one_phrase_is_ended_well_before_its_end(responses: bool) -> None:
    shown: list[str] = []
    with FakeOpenAI([Reply(text=LOOPING, chunk_size=4, cut_at_limit=True)]) as server:
        kind = ResponsesModel if responses else OpenAIModel
        model = kind(model="m", base_url=server.base_url, api_key="k")
        turn = model.complete(
            [{"role": "user", "content": "hi"}], [], CallOptions(on_text=shown.append)
        )
    assert turn.finish_reason == "repetition" and turn.cut_off
    assert turn.text == HEAD + PHRASE
    assert re.fullmatch(rf"{re.escape(repr(PHRASE))} written \d+ times in a row", turn.runaway)
    read = "".join(shown)
    assert LOOPING.startswith(read) and len(read) < len(LOOPING) / 2, "the stream was left there"
    # The server never sent this reply's usage: what it cost is estimated from what was read.
    assert not turn.usage.reported and turn.usage.completion_tokens >= len(read) // 4


def test_a_call_whose_arguments_loop_is_dropped_and_the_calls_before_it_kept() -> None:
    looping = '{"path": "a.py", "content": "x = 1' + r"\n" * 300 + '"}'
    reply = Reply(tool_calls=[("read_file", '{"path": "a.py"}'), ("write_file", looping)])
    with FakeOpenAI([reply]) as server:
        model = OpenAIModel(model="m", base_url=server.base_url, api_key="k")
        turn = model.complete([{"role": "user", "content": "hi"}], [])
    assert [c.name for c in turn.tool_calls] == ["read_file"]
    assert turn.finish_reason == "repetition" and "\\\\n" in turn.runaway


def run_on_server(workspace: Path, replies: list[Reply]) -> tuple[Recorder, FakeOpenAI]:
    recorder = Recorder()
    with FakeOpenAI(replies) as server:
        model = OpenAIModel(
            model="m",
            base_url=server.base_url,
            api_key="k",
            temperature=0.0,
            varied_sampling=PENALTIES,
        )
        agent = make_agent(
            workspace,
            model,  # type: ignore[arg-type]
            recorder,
            edits=EditGuard(workspace),
            file_blocks=True,
        )
        messages: list[Message] = [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "Write clean in calc.py."},
        ]
        run_agent(agent, messages)
    return recorder, server


def test_the_ask_after_a_looping_reply_is_sampled_away_from_it(workspace: Path) -> None:
    written = "calc.py\n```python\ndef clean(s):\n    return s.replace('x', '')\n```\n"
    recorder, server = run_on_server(
        workspace, [Reply(text=LOOPING, cut_at_limit=True), Reply(text=written), Reply("Done.")]
    )
    first, second, third = server.requests
    assert first["temperature"] == 0.0 and "repeat_penalty" not in first
    assert second["temperature"] == VARIED_TEMPERATURES[0]
    assert {k: second[k] for k in PENALTIES} == PENALTIES, "the penalties the server honours"
    assert third["temperature"] == 0.0 and "repeat_penalty" not in third, "a good reply: as usual"
    calls = [r for r in recorder.records if r["event"] == "llm_call"]
    assert calls[0]["finish_reason"] == "repetition" and PHRASE in calls[0]["runaway"]
    assert calls[1]["varied"] == 1 and "varied" not in calls[2]
    told = [r["content"] for r in recorder.records if r["event"] == "user_message"]
    assert told[0].startswith("Your reply began repeating itself") and PHRASE in told[0]
    assert "return s.replace('x', '')" in (workspace / "calc.py").read_text()
    shown = [line.plain for line in render(recorder.records) if "[step" in line.plain]
    assert shown[0].endswith(f"; ended in a loop: {calls[0]['runaway']}"), "gaffer logs says why"
    assert shown[1].endswith(", sampled away from 1 bad reply")


def test_a_reply_the_run_already_had_is_recognised_and_not_asked_for_the_same_way(
    workspace: Path,
) -> None:
    """A block that does not parse, sent back and sent again (with one more blank line):
    each ask after it is sampled further from it, and the agent, going round, is stuck:
    the aids step in (the focused ask, aside) and it is told so once."""
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    unparsable = "calc.py\n```python\ndef add(a, b:\n    return a + b\n```"
    script = [
        call("read_file", path="calc.py"),
        say(unparsable),
        say(unparsable + "\n\n"),
        say("I do not see it."),  # the focused ask
        say("Done."),
    ]
    model = ScriptedModel(script)  # type: ignore[arg-type]
    recorder = Recorder()
    agent = make_agent(workspace, model, recorder, edits=EditGuard(workspace), file_blocks=True)
    run_agent(agent, [{"role": "system", "content": "s"}, {"role": "user", "content": "Fix add."}])

    calls = [r for r in recorder.records if r["event"] == "llm_call"]
    assert "same_as" not in calls[1] and calls[2]["same_as"] == 2, "the step that first had it"
    assert calls[3]["aside"] and calls[3]["step"] == 3, "stuck at once: the focused ask"
    shown = [line.plain for line in render(recorder.records) if line.plain.startswith("[step 3]")]
    assert shown[0].endswith("sampled away from 1 bad reply; the same reply as step 2")
    told = [r["content"] for r in recorder.records if r.get("source") == "repetition"]
    assert told == [told[0]] and "word for word the one before it" in told[0]
    assert model.varied[:5] == [0, 0, 1, 0, 2], "each bad reply in a row samples further away"
    model.assert_used_up()


def test_a_call_made_again_is_recognised_but_is_no_bad_reply() -> None:
    """Running the tests again after a change is the same reply, and a good one."""
    guard = ReplyGuard()
    tests = call("run_shell", command="pytest")
    again = AssistantTurn(tool_calls=tests.tool_calls, usage=tests.usage)
    assert guard.observe(tests, 1) is None
    assert guard.observe(again, 3) == 1 and guard.vary() == 0
    assert guard.observe(AssistantTurn(text="x", finish_reason="length"), 4) is None
    assert guard.vary() == 1
    # Tools paused, the bundled model at 9k tokens of context wrote nothing, twice.
    assert guard.observe(AssistantTurn(text=" \n"), 5) is None and guard.vary() == 2


def test_a_reply_that_is_nothing_but_a_looping_call_is_asked_for_again(workspace: Path) -> None:
    looping = '{"path": "calc.py", "content": "' + r"\n" * 400 + '"}'
    recorder, server = run_on_server(
        workspace, [Reply(tool_calls=[("write_file", looping)]), Reply("Done.")]
    )
    told = [r["content"] for r in recorder.records if r["event"] == "user_message"]
    assert told[0].startswith("Your last reply could not be read (the reply ran into a loop: ")
    assert server.requests[1]["temperature"] == VARIED_TEMPERATURES[0]
    assert not (workspace / "calc.py").exists()


def test_a_reply_again_is_known_whatever_space_ends_its_lines() -> None:
    """Space at the ends of lines is not the reply; the reply just before it, word for
    word, is said again (going round, for the repetition guard); an older one is only
    the same."""
    guard, repetition = ReplyGuard(), RepetitionGuard()

    def again(text: str, step: int) -> tuple[int | None, bool]:
        ask = ModelAsk([], step)
        for seen in (guard, repetition):
            seen.after_model(ask, say(text))
        repetition.after_batch()
        return ask.same_as, "word for word" in (repetition.take_nudge() or "")

    assert again("calc.py\n```python\nx = 1\n```\n", 1) == (None, False)
    assert again("calc.py  \n```python\nx = 1\n```\n\n\n", 2) == (1, True)
    assert again("calc.py\n```python\nx = 2\n```", 3) == (None, False)
    assert again("calc.py\n```python\nx = 1\n```", 4) == (1, False)
    assert again("calc.py\n```python\n    x = 1\n```", 5)[0] is None, "indent counts"


def test_a_reply_said_again_is_warned_about_apart_from_calls_going_round() -> None:
    """A nudge about a cycle of calls twenty steps back does not turn the first reply
    said again into the end of the run; the second one said again ends it."""
    guard = RepetitionGuard()
    for _ in range(2):
        for path in ("a.py", "b.py"):
            guard.observe(ToolCall("c", "read_file", f'{{"path": "{path}"}}'), ToolResult("x"))
    assert guard.take_nudge() is not None and guard.stop is None, "the cycle, warned"
    guard.same_reply()
    assert guard.stop is None and "word for word" in (guard.take_nudge() or "")
    guard.same_reply()
    assert guard.stop is not None and guard.stop.limit == "repetition"
