"""An agent with a deadline sees what it has time to read, and answers before it.

The scripted model's calls take a set time for 10 prompt and 5 reply tokens, reporting
no cached count: a reply token then costs the call's time over 5, and a prompt token a
quarter of that (the prior), times the margin."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import make_agent, tool_messages
from tests.test_citations import reader_gate
from workers.guards.editing import EditGuard
from workers.limits import Budget, Limits
from workers.log.events import Recorder
from workers.loop import run_agent
from workers.model import Message, ServerTimes
from workers.model.scripted import ScriptedModel, call, calls, say
from workers.outcome import Finished
from workers.pace import ANSWER_MARGIN, ANSWER_TOKENS, MARGIN, PROMPT_COST_PRIOR, Pace
from workers.tools import BUILTIN_TOOLS

HELD = "not shown: reading it would take about"


def test_the_pace_tells_reading_a_prompt_from_writing_a_reply() -> None:
    pace = Pace()
    assert pace.seconds_for(5000) == 0.0 and not pace.known()  # nothing timed yet
    pace.took(20.0, 100, 190)  # ~0.1 s a reply token
    pace.took(41.0, 4000, 10)  # ~0.01 s a prompt token
    # 8,000 new tokens and a reply as long as the longest: about 80 + 19 s, erring long.
    assert 100 < pace.seconds_for(8000) < 135
    assert 0 < pace.seconds_for(8000, 0) < pace.seconds_for(8000)


def test_calls_too_alike_to_tell_apart_take_the_prompts_share_from_the_prior() -> None:
    """Prompt and reply sizes that grow together say nothing of either rate alone: one
    rate, so a batch of long results is never taken to cost nothing."""
    pace = Pace()
    pace.took(10.0, 20, 100)
    pace.took(20.2, 40, 200)
    per_reply = 30.2 / (300 + PROMPT_COST_PRIOR * 60)
    assert pace.seconds_for(10_000, 0) == pytest.approx(
        MARGIN * PROMPT_COST_PRIOR * per_reply * 10_000
    )


def test_calls_with_no_token_counts_are_judged_by_the_slowest() -> None:
    pace = Pace()
    pace.took(3.0, None, None)
    pace.took(7.0, None, None)
    assert pace.known() and not pace.measured()
    assert pace.seconds_for(100_000) == 7.0


def test_a_worker_is_judged_by_its_callers_calls_to_the_same_model() -> None:
    run = Budget(max_seconds=200)
    run.pace("qwen").took(30.0, 100, 200)  # a reply of 200 tokens: ~35 s
    worker = run.child(Limits(max_seconds=100))
    assert worker.pace("qwen") is run.pace("qwen")
    assert worker.no_time_for_another_step("qwen", 0) is False  # two replies fit in 100 s
    assert worker.no_time_for_another_step("qwen", 3_000) is True  # reading: ~120 s
    assert worker.no_time_for_another_step("another", 3_000) is False  # nothing known


def files(workspace: Path, sizes: dict[str, int]) -> None:
    for name, size in sizes.items():
        (workspace / name).write_text(("x = 1  # " + "y" * 89 + "\n") * (size // 100))


def run(
    workspace: Path, script: list[object], seconds: float, **kwargs: object
) -> tuple[object, ScriptedModel, list[Message], Recorder]:
    model = ScriptedModel(script, latency=0.1)  # type: ignore[arg-type]
    recorder = Recorder()
    agent = make_agent(workspace, model, recorder, Limits(max_seconds=seconds), **kwargs)
    result = run_agent(agent, [{"role": "user", "content": "what sets x?"}])
    return result.outcome, model, tool_messages(result), recorder


def test_a_batch_longer_than_the_time_left_can_read_is_held_back_once_it_fills_up(
    workspace: Path,
) -> None:
    """A prompt token costs ~6 ms, and 30 s leaves ~8.9 s for the batch (half, less an
    answer of 256 tokens): ~1,480 tokens. a.py and b.py fit (1,333), c.py and d.py do
    not; a short result after them is still shown."""
    files(workspace, {"a.py": 1_000, "b.py": 3_000, "c.py": 12_000, "d.py": 2_400})
    reads = calls(*(("read_file", {"path": n}) for n in ("a.py", "b.py", "c.py", "d.py")))
    script = [calls(("list_dir", {})), reads, say("a.py and b.py set x")]
    outcome, model, shown, recorder = run(workspace, [*script], 30)

    assert outcome == Finished("a.py and b.py set x")
    results = [m["content"] for m in shown[1:]]
    assert [r.startswith("x = 1") for r in results] == [True, True, False, False]
    assert all(HELD in r and "of the 30 s this agent has left" in r for r in results[2:])
    assert "c.py" in results[2] and "a range of lines" in results[2]
    logged = [r["summary"] for r in recorder.of("tool_call")]
    assert logged[3].startswith("held back: ~") and logged[3].endswith("s left")
    assert model.paused == [False, False, False]  # time was left for a step and an answer


def test_a_held_back_read_asked_for_again_runs(workspace: Path) -> None:
    """It was never shown, so asking again, narrower or not, is no repeat."""
    files(workspace, {"big.py": 12_000})
    again = call("read_file", path="big.py", limit=10)
    script = [calls(("list_dir", {})), call("read_file", path="big.py"), again, say("big.py")]
    outcome, _, shown, _ = run(workspace, script, 30)
    assert outcome == Finished("big.py")
    assert HELD in shown[1]["content"]
    assert shown[2]["content"].startswith("x = 1")


def test_the_time_left_can_read_a_short_batch_whole(workspace: Path) -> None:
    files(workspace, {"a.py": 6_000, "b.py": 6_000})
    reads = calls(("read_file", {"path": "a.py"}), ("read_file", {"path": "b.py"}))
    _, _, shown, _ = run(workspace, [calls(("list_dir", {})), reads, say("both")], 600)
    assert all(m["content"].startswith(("x = 1", "a.py")) for m in shown)


def test_an_agent_with_no_deadline_is_shown_everything(workspace: Path) -> None:
    files(workspace, {"a.py": 30_000})
    model = ScriptedModel([call("list_dir"), call("read_file", path="a.py"), say("ok")])
    agent = make_agent(workspace, model, Recorder(), Limits())
    result = run_agent(agent, [{"role": "user", "content": "read it"}])
    assert tool_messages(result)[1]["content"].startswith("x = 1")


def test_a_file_held_back_from_a_reader_is_not_one_it_opened(workspace: Path) -> None:
    files(workspace, {"big.py": 12_000})
    recorder = Recorder()
    script = [
        call("find_files", pattern="*.txt"),  # times a call, and shows no file
        call("read_file", path="big.py"),
        say("x is set in big.py, line 1."),
        say("x is set in big.py, line 1."),
    ]
    _, model, _, _ = run(workspace, script, 30, gate=reader_gate(workspace, recorder))
    sent = [str(m["content"]) for m in model.seen[-1] if m["role"] == "user"]
    assert any("big.py, which none of your calls opened, listed or matched" in s for s in sent)


def test_a_file_held_back_from_an_editor_is_not_read_before_its_change(workspace: Path) -> None:
    files(workspace, {"big.py": 12_000})
    script = [
        call("list_dir"),
        call("read_file", path="big.py"),
        call("edit_file", path="big.py", old="x = 1", new="x = 2"),
        say("done"),
    ]
    _, _, shown, _ = run(
        workspace, script, 30, edits=EditGuard(workspace), tools=dict(BUILTIN_TOOLS)
    )
    assert HELD in shown[1]["content"]
    assert shown[2]["content"].startswith("refused: read big.py before changing it")


def test_an_answer_is_taken_to_run_longer_than_a_reply_that_calls_tools() -> None:
    """Tool-call replies of 30 tokens say little of an answer's length: the demo's
    reader's ran to 318 tokens, 54 s."""
    pace = Pace()
    pace.took(3.6, 0, 30)  # ~0.12 s a reply token
    assert pace.answer_seconds() == pytest.approx(pace.seconds_for(0, ANSWER_TOKENS))
    assert pace.answer_seconds() > 8 * pace.seconds_for(0)
    pace.took(120.0, 0, 1000)  # a longer reply than that was written: it is the measure
    assert pace.answer_seconds() == pace.seconds_for(0)


def test_an_aside_times_the_model_but_not_how_long_its_replies_run() -> None:
    pace = Pace()
    pace.took(6.0, 0, 40)
    before = pace.seconds_for(0)
    pace.took(60.0, 0, 500, aside=True)  # a first answer from the map: 500 tokens
    assert pace.seconds_for(0) == pytest.approx(before, rel=0.2)  # still ~40 tokens long


def test_a_held_back_read_asked_for_again_as_it_was_shows_its_start(workspace: Path) -> None:
    """Told to ask for less, the bundled model asked for the same grep eight times over.
    The same call again shows as much of its start as the time allows, and says what is
    left out; a third time is a repeat like any other."""
    files(workspace, {"big.py": 12_000})
    same = call("read_file", path="big.py")
    script = [calls(("list_dir", {})), same, same, same, say("big.py")]
    outcome, _, shown, _ = run(workspace, script, 30)
    assert outcome == Finished("big.py")
    assert HELD in shown[1]["content"]
    start = shown[2]["content"]
    assert start.startswith("x = 1") and "lines; the rest would take about" in start
    assert start.count("\n") < 120, "not the whole file"
    assert HELD not in shown[3]["content"] and not shown[3]["content"].startswith("x = 1")


def test_a_result_cheap_to_read_is_shown_however_near_the_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An answer's time from the deadline, a 2 s result of 79 s left was held back from
    the demo's explorer, which then answered from nothing. A result this cheap, against
    the time left, is shown while the batch is within its share; a dear one is not."""
    from workers.guard_hooks import PendingCall, StepStart
    from workers.guards.time_left import CHEAP_SHARE, TimeKeeper
    from workers.log.events import Emitter
    from workers.model import ToolCall
    from workers.tools.base import CHARS_PER_TOKEN, ToolResult

    budget = Budget(Limits(max_seconds=600))
    budget.pace("qwen").took(10.0, 100, 100)  # 0.1 s a reply token, 0.025 s a prompt token
    answer = budget.pace("qwen").answer_seconds()
    left = 2 * answer + 1.0  # half of it, less an answer: 0.5 s
    monkeypatch.setattr(budget, "seconds_left", lambda: left)
    keeper = TimeKeeper()
    model = type("M", (), {"name": "qwen"})()
    keeper.before_step(StepStart([], [], 1, model, budget, Emitter([])))  # type: ignore[arg-type]

    def shown(chars: int) -> bool:
        call = ToolCall(id="1", name="read_file", arguments=f'{{"path": "{chars}.py"}}')
        pending = PendingCall(call, {"path": f"{chars}.py"}, ("read_file", str(chars)))
        keeper.after_model(type("Ask", (), {"aside": False})(), None)  # type: ignore[arg-type]
        return keeper.after_call(pending, ToolResult("x" * chars)).output.startswith("x")

    tokens = int(CHEAP_SHARE * left / budget.pace("qwen").seconds_for(1, 0) * 0.9)
    cheap = tokens * CHARS_PER_TOKEN
    assert budget.pace("qwen").seconds_for(tokens, 0) > 0.5, "more than the room"
    assert shown(cheap)
    assert not shown(cheap * 2)


def test_an_answer_asked_with_tools_paused_is_cut_at_what_the_time_left_can_write() -> None:
    """The demo's explorer, paused with 78 s left, wrote for 78 s and ended out of time
    with nothing. Paused for time, its reply is capped at what the time left can write."""
    pace = Pace()
    pace.took(10.0, 100, 100)  # one rate: 0.08 s a reply token, 0.02 s a prompt token
    assert pace.reply_tokens_within(78.0) == int(78.0 / ANSWER_MARGIN / 0.08)
    assert pace.reply_tokens_within(1.0) == 64, "never cut shorter than saying anything"
    assert Pace().reply_tokens_within(78.0) is None, "no call timed: no cap"


def test_the_rates_a_server_says_it_spent_stand_over_a_fit_of_wall_times() -> None:
    """The demo's first two calls (a cold server; the second's prompt read deep in a
    long context) fit 0.25 s a reply token; the server said 0.1. Told, the pace takes
    the server's rates, whatever the usage says was cached."""
    fitted, told = Pace(), Pace()
    fitted.took(42.3, 2629, 18)
    fitted.took(23.5, 1000, 37)
    told.took(42.3, 2629, 18, server=ServerTimes(2629, 40.0, 18, 1.8))
    told.took(23.5, None, 37, server=ServerTimes(1000, 20.0, 37, 3.7))
    assert told.reply_tokens_within(78.0) == int(78.0 / ANSWER_MARGIN / 0.1)
    assert 2 * (fitted.reply_tokens_within(78.0) or 0) < int(78.0 / ANSWER_MARGIN / 0.1)
    assert told.seconds_for(1000, 0) == pytest.approx(MARGIN * 60.0 / 3629 * 1000)


def test_what_a_server_says_past_the_calls_own_time_or_faster_than_any_writer_is_not_believed() -> (
    None
):
    """A broken or hostile endpoint: a reply written in no time would lift every cap
    (and overflow), one said to take longer than the call itself pins them at the
    least; neither is believed, and the pace stays the calls' own."""
    for server in (
        ServerTimes(100, 0.0, 1, 5e-324),
        ServerTimes(100, 0.0, 40, 0.001),
        ServerTimes(100, 1.0, 40, 999.0),
        ServerTimes(0, 0.0, 0, 0.0),
    ):
        pace = Pace()
        pace.took(10.0, 100, 100, server=server)
        assert pace.reply_tokens_within(78.0) == int(78.0 / ANSWER_MARGIN / 0.08), server


def test_an_answers_cap_stands_on_the_latest_calls_and_what_it_must_read_first() -> None:
    """The demo at 94f744b: a 2,637-token first prompt read at 14 ms a token, then short
    ones at 25 to 39 ms and replies slowing as the context grew. Its answer, capped from
    every call's rates, wrote 395 tokens at 8 a second into 60 s and was cut. Capped
    from the latest calls, reading the pause's 250 tokens first, it fits."""
    pace = Pace()
    said = [(2637, 38.55, 18, 1.72), (1000, 17.29, 37, 4.0), (34, 1.27, 21, 2.22)]
    said += [(122, 2.34, 42, 4.68), (93, 2.21, 37, 4.07), (34, 1.33, 21, 2.33)]
    for server in said:
        pace.took(sum(server[1::2]) + 0.1, server[0], server[2], server=ServerTimes(*server))
    cap = pace.reply_tokens_within(59.6, 250)
    assert cap is not None and 10.0 + cap * 0.124 < 59.6, "the demo's prompt and its rate"
    assert cap < pace.reply_tokens_within(59.6, 0) < 395
    # Asides (first answers asked with a short context of their own) say nothing of it.
    for _ in range(4):
        pace.took(1.0, 30, 5, aside=True, server=ServerTimes(30, 0.5, 5, 0.3))
    assert pace.reply_tokens_within(59.6, 250) == cap


def test_a_paused_reply_is_asked_for_no_longer_than_the_time_left(workspace: Path) -> None:
    files(workspace, {"a.py": 300})
    script = [calls(("list_dir", {})), say("a.py sets x")]
    answer = ANSWER_TOKENS * 0.1 / 5 * MARGIN  # ~6.1 s: after the first call, only an answer
    outcome, model, _, _ = run(workspace, script, answer)
    assert outcome == Finished("a.py sets x")
    assert model.paused[-1] and model.max_tokens[-1] is not None
    assert not model.paused[0] and model.max_tokens[0] is None
