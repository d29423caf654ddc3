"""An agent with a deadline sees what it has time to read, and answers before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import make_agent, tool_messages
from workers.limits import Budget, Limits
from workers.log.events import Recorder
from workers.loop import run_agent
from workers.model.scripted import ScriptedModel, calls, say
from workers.outcome import Finished
from workers.pace import Pace


def test_the_pace_tells_reading_a_prompt_from_writing_a_reply() -> None:
    pace = Pace()
    assert pace.seconds_for(5000) == 0.0  # nothing measured: nothing known
    pace.took(20.0, new_prompt=100, completion=190)  # ~0.1 s a reply token
    pace.took(41.0, new_prompt=4000, completion=10)  # ~0.01 s a prompt token
    # 8,000 new tokens and a reply as long as the longest: about 80 + 19 s, erring long.
    assert 100 < pace.seconds_for(8000) < 135
    assert 0 < pace.seconds_for(8000, 0) < pace.seconds_for(8000)


def test_until_a_long_prompt_is_timed_prompt_tokens_cost_a_share_of_a_reply_token() -> None:
    """Calls that read little say nothing of how fast prompts are read: the prior holds,
    so a batch of long results is never taken to cost nothing."""
    pace = Pace()
    pace.took(10.0, new_prompt=20, completion=100)
    pace.took(20.2, new_prompt=40, completion=200)
    per_reply = pace.seconds_for(0, 1) / 1.2
    assert pace.seconds_for(10_000, 0) == pytest.approx(1.2 * 0.15 * per_reply * 10_000, rel=0.05)


def test_calls_with_no_token_counts_are_judged_by_the_slowest() -> None:
    pace = Pace()
    pace.took(3.0)
    pace.took(7.0)
    assert pace.known() and pace.seconds_for(100_000) == 7.0


def test_a_worker_is_judged_by_its_callers_calls() -> None:
    run = Budget(max_seconds=200)
    run.pace.took(30.0, new_prompt=100, completion=200)  # a reply of 200 tokens: ~35 s
    worker = run.child(Limits(max_seconds=100))
    assert worker.pace is run.pace
    assert worker.no_time_for_another_step(0) is False  # two replies fit in 100 s
    assert worker.no_time_for_another_step(3_000) is True  # reading 3,000 tokens: ~75 s


def test_a_batch_too_long_to_read_in_the_time_left_is_held_back_largest_first(
    workspace: Path,
) -> None:
    """Each call takes 0.1 s for 10 prompt and 5 reply tokens, so 10,000 new tokens
    would take ~28 s; the agent has 20 s. The two largest reads go (12 and 9 KB), the
    others stay, and the agent answers from them."""
    sizes = {"big.py": 12_000, "large.py": 9_000, "mid.py": 6_000, "small.py": 1_000}
    for name, size in sizes.items():
        (workspace / name).write_text(("x = 1  # " + "y" * 89 + "\n") * (size // 100))
    reads = calls(*(("read_file", {"path": name}) for name in sizes))
    model = ScriptedModel([reads, say("mid.py and small.py set x")], latency=0.1)
    recorder = Recorder()
    agent = make_agent(workspace, model, recorder, Limits(max_seconds=20))
    result = run_agent(agent, [{"role": "user", "content": "what sets x?"}])

    assert result.outcome == Finished("mid.py and small.py set x")
    shown = {m["tool_call_id"]: m["content"] for m in tool_messages(result)}
    held = [c for c in shown.values() if "not shown: reading it would take about" in c]
    assert len(held) == 2
    assert all("big.py" in c or "large.py" in c for c in held)
    assert "and this agent has" in held[0] and "offset and limit" in held[0]
    kept = [c for c in shown.values() if c.startswith("x = 1")]
    assert len(kept) == 2
    assert model.paused == [False, False]  # time was left for a step and an answer


def test_a_batch_the_time_left_can_read_is_shown_whole(workspace: Path) -> None:
    for name in ("a.py", "b.py"):
        (workspace / name).write_text("x = 1\n" * 1000)
    reads = calls(("read_file", {"path": "a.py"}), ("read_file", {"path": "b.py"}))
    model = ScriptedModel([reads, say("both")], latency=0.05)
    agent = make_agent(workspace, model, Recorder(), Limits(max_seconds=600))
    result = run_agent(agent, [{"role": "user", "content": "read them"}])
    assert all(m["content"].startswith("x = 1") for m in tool_messages(result))
    assert result.outcome == Finished("both")


def test_an_agent_with_no_deadline_is_shown_everything(workspace: Path) -> None:
    (workspace / "a.py").write_text("x = 1\n" * 5000)
    model = ScriptedModel([calls(("read_file", {"path": "a.py"})), say("ok")], latency=0.05)
    agent = make_agent(workspace, model, Recorder(), Limits())
    result = run_agent(agent, [{"role": "user", "content": "read it"}])
    assert tool_messages(result)[0]["content"].startswith("x = 1")
