"""Masking and compaction keep a long run inside a small window without losing its goal."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from workers.agent import Agent
from workers.facts import Facts
from workers.guard_hooks import Guards
from workers.guards.context import (
    STUB_PREFIX,
    SUMMARIZE,
    ContextKeeper,
    mask,
    task_state,
    window_for,
)
from workers.limits import Budget, Limits
from workers.log.events import Emitter, Recorder
from workers.loop import run_agent
from workers.model import AssistantTurn, CallOptions, Message, Usage
from workers.model.scripted import ScriptedModel, call, calls, say
from workers.sandbox.host import HostSandbox
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import ToolContext, result_chars

RULES = "Always run `make check` before answering. Never touch vendor/."


def conversation(turns: int, output: str = "x" * 1000) -> list[Message]:
    messages: list[Message] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "the goal"},
    ]
    for i in range(turns):
        ids = [f"c{i}a", f"c{i}b"]
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": f'{{"path": "f{i}.py"}}'},
                    }
                    for cid in ids
                ],
            }
        )
        messages += [{"role": "tool", "tool_call_id": cid, "content": output} for cid in ids]
    return messages


def assert_pairs_intact(messages: list[Message]) -> None:
    """Every tool result follows its assistant call; every call has its result."""
    open_ids: set[str] = set()
    for message in messages:
        if message["role"] == "assistant":
            assert not open_ids, f"calls {open_ids} were left without results"
            open_ids = {c["id"] for c in message.get("tool_calls") or []}
        elif message["role"] == "tool":
            assert message["tool_call_id"] in open_ids, "a tool result lost its call"
            open_ids.discard(message["tool_call_id"])
    assert not open_ids


def test_mask_stubs_old_outputs_only_and_keeps_pairs() -> None:
    messages = conversation(8)
    masked = mask(messages, keep_turns=4)
    assert masked == 8  # two results in each of the four oldest turns
    tools = [m for m in messages if m["role"] == "tool"]
    assert all(m["content"].startswith(STUB_PREFIX) for m in tools[:8])
    assert all(m["content"] == "x" * 1000 for m in tools[8:])
    assert (
        'read_file {"path": "f0.py"} elided to save context: 1000 characters' in tools[0]["content"]
    )
    assert_pairs_intact(messages)
    assert mask(messages, keep_turns=4) == 0  # already masked


def test_window_defaults() -> None:
    assert window_for("gpt-4o-mini") == 128_000
    assert window_for("qwen2.5-coder-1.5b-instruct") == 32_768
    assert window_for("some-local-model") == 32_768
    assert window_for("anything", configured=8000) == 8000


def test_task_state_is_built_from_facts() -> None:
    facts = [
        Facts(modified=("a.py",)),
        Facts(command="pytest -q", exit_code=1),
        Facts(
            worker="w1",
            evidence=(Facts(modified=("b.py",)), Facts(command="python -m pytest", exit_code=0)),
        ),
    ]
    state = task_state("fix the bug", RULES, facts)
    assert "Goal: fix the bug" in state and RULES in state
    assert "Files changed: a.py, b.py" in state
    assert "- `pytest -q` → exit 1" in state
    assert "Last test result: `python -m pytest` → exit 0" in state


class LongRunModel:
    """Reads files forever with a growing prompt; answers summary requests; finishes late."""

    name = "long-run"

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.calls = 0
        self.summaries = 0
        self.seen: list[list[Message]] = []

    def complete(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]],
        options: CallOptions = CallOptions(),
    ) -> AssistantTurn:
        if messages[0]["content"] == SUMMARIZE:
            self.summaries += 1
            return AssistantTurn(
                text=f"summary {self.summaries}: read files up to now", usage=Usage(500, 50)
            )
        self.seen.append([dict(m) for m in messages])
        self.calls += 1
        if self.calls >= self.steps:
            return AssistantTurn(text="finished", usage=Usage(100, 5))
        # The endpoint's count grows with the conversation, as a real one's would.
        prompt = sum(len(str(m.get("content") or "")) for m in messages) // 4
        turn = call("read_file", path=f"f{self.calls}.txt")
        return AssistantTurn(
            tool_calls=turn.tool_calls, usage=Usage(prompt, 20), finish_reason="tool_calls"
        )


def test_a_long_run_keeps_goal_and_rules_through_several_compactions(workspace: Path) -> None:
    for i in range(160):
        (workspace / f"f{i}.txt").write_text(f"file {i}\n" + "content line\n" * 110)
    recorder = Recorder()
    model = LongRunModel(steps=150)
    agent = Agent(
        model=model,
        tools=dict(BUILTIN_TOOLS),
        sandbox=HostSandbox(ToolContext(workspace)),
        events=Emitter([recorder]).bind(session_id="s", agent_id="main"),
        limits=Limits(max_steps=160),
        budget=Budget(),
        guards=Guards((ContextKeeper(window=3000, rules=RULES),)),
    )
    system = {"role": "system", "content": "You are careful.\n\n# Project instructions\n\n" + RULES}
    result = run_agent(agent, [system, {"role": "user", "content": "read every file and report"}])
    assert result.outcome.__class__.__name__ == "Finished"
    compactions = recorder.of("compaction")
    assert len(compactions) >= 3
    assert all(c["tokens_after"] < c["tokens_before"] for c in compactions)
    last_seen = model.seen[-1]
    assert last_seen[0] == system
    state = last_seen[1]["content"]
    assert "Goal: read every file and report" in state and RULES in state
    assert f"summary {model.summaries}" in state
    assert_pairs_intact(last_seen)
    # The prompt stayed bounded although the run read far more than the window.
    prompts = [r["prompt_tokens"] for r in recorder.of("llm_call")]
    assert max(prompts) < 3000
    assert sum(len(m.get("content") or "") for m in last_seen) // 4 < 3000


def test_compaction_by_hand_folds_old_turns(workspace: Path) -> None:
    messages = conversation(6)
    recorder = Recorder()
    model = LongRunModel(steps=1)
    agent = Agent(
        model=model,
        tools={},
        sandbox=HostSandbox(ToolContext(workspace)),
        events=Emitter([recorder]).bind(session_id="s", agent_id="main"),
        budget=Budget(),
    )
    keeper = ContextKeeper(window=100_000, rules=RULES)
    assert keeper.compact(messages, [], 0, reason="manual", **with_(agent))
    assert messages[0]["content"] == "sys" and messages[1]["content"].startswith("[Task state")
    assert sum(1 for m in messages if m["role"] == "assistant") == 4
    assert_pairs_intact(messages)
    assert recorder.of("compaction")[0]["reason"] == "manual"
    short = conversation(2)
    assert not keeper.compact(short, [], 0, reason="manual", **with_(agent)) or len(short) < len(
        conversation(2)
    )


def test_a_batch_that_jumps_past_the_window_is_folded_before_the_next_call(workspace: Path) -> None:
    messages = conversation(6, output="y" * 200)
    keeper = ContextKeeper(window=4000)
    keeper.observe(1000, messages)  # the endpoint's count for the prompt as it was
    messages[-1]["content"] = "z" * 40_000  # then one long result arrives
    recorder = Recorder()
    agent = Agent(
        model=LongRunModel(steps=1),
        tools={},
        sandbox=HostSandbox(ToolContext(workspace)),
        events=Emitter([recorder]).bind(session_id="s", agent_id="main"),
        budget=Budget(),
    )
    keeper.prepare(
        messages, [], step=7, model=agent.model, budget=agent.budget, events=agent.events
    )
    assert recorder.of("compaction"), "the jump was only seen after the endpoint refused it"
    assert (
        keeper.projected(messages) < 0.8 * 4000
        or len([m for m in messages if m["role"] == "assistant"]) == 1
    )
    assert_pairs_intact(messages)


def reader(workspace: Path, model: ScriptedModel, recorder: Recorder) -> Agent:
    return Agent(
        model=model,
        tools=dict(BUILTIN_TOOLS),
        sandbox=HostSandbox(ToolContext(workspace)),
        events=Emitter([recorder]).bind(session_id="s", agent_id="main"),
        budget=Budget(),
        guards=Guards((ContextKeeper(window=4096),)),
        max_output_chars=result_chars(4096),
    )


def test_a_batch_the_window_cannot_hold_shows_its_largest_results_as_not_shown(
    workspace: Path,
) -> None:
    """Sixteen long results in one batch, each within its share, overfill a small window
    together (the bench's explorer read 16 files in its first reply, and ended with no
    answer): the largest are not shown, and it goes on to answer."""
    for i in range(16):
        (workspace / f"f{i}.txt").write_text("line of text\n" * 400)
    recorder = Recorder()
    reads = calls(*(("read_file", {"path": f"f{i}.txt"}) for i in range(16)))
    reads = dataclasses.replace(reads, usage=Usage(100, 20))  # as an endpoint counts 400 chars
    model = ScriptedModel([reads, say("done")])
    result = run_agent(
        reader(workspace, model, recorder),
        [{"role": "system", "content": "s" * 398}, {"role": "user", "content": "go"}],
    )
    assert result.outcome.__class__.__name__ == "Finished"
    shown = [str(m["content"]) for m in model.seen[1] if m["role"] == "tool"]
    hidden = [c for c in shown if "not shown: with the other results of this reply" in c]
    assert 0 < len(hidden) < 16, "the largest go, and only as many as must"
    assert sum(len(str(m.get("content") or "")) for m in model.seen[1]) // 4 < 4096
    assert_pairs_intact(model.seen[1])


def test_a_prompt_the_window_cannot_hold_is_never_sent(workspace: Path) -> None:
    """A task that alone is more than the window: the agent stops with a named reason."""
    recorder = Recorder()
    model = ScriptedModel([say("never")])
    task = "read this: " + "word " * 20_000
    result = run_agent(
        reader(workspace, model, recorder),
        [{"role": "system", "content": "s"}, {"role": "user", "content": task}],
    )
    assert result.outcome.__class__.__name__ == "LimitHit"
    assert result.outcome.limit == "context"  # type: ignore[union-attr]
    assert "4096-token window" in result.outcome.detail  # type: ignore[union-attr]
    assert not model.seen, "the oversize prompt reached the model"
    assert recorder.of("agent_end")[0]["reason"].startswith("context limit")


def with_(agent: Agent) -> dict[str, Any]:
    """What compaction needs of an agent: its model, budget and log."""
    return {"model": agent.model, "budget": agent.budget, "events": agent.events}
