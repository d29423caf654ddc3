"""Keeping a long conversation inside the model's context window.

First, old tool outputs are masked: beyond the last few turns a long result becomes a
one-line stub naming the tool, its arguments and its size (the agent can call it again).
Then, if the prompt still nears the window, older turns are compacted: one model call
summarises them, and a task-state block built by the harness from its own facts (goal,
project rules, files changed, commands and exit codes, last test result) is pinned in
front, so the goal and the rules survive any number of compactions. A cut never falls
between an assistant's tool calls and their results.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from workers.facts import Facts
from workers.guard_hooks import Guard, ModelAsk, StepStart
from workers.guards.test_runs import is_test_run
from workers.guards.verification import evidence, files_changed, outcome
from workers.limits import Budget
from workers.log.events import Emitter
from workers.log.schema import Compaction
from workers.model import AssistantTurn, CallOptions, Message, Model
from workers.outcome import LimitHit
from workers.tools.base import CHARS_PER_TOKEN

# Known context windows, by model-name prefix; anything else gets the conservative default.
KNOWN_WINDOWS: dict[str, int] = {
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-5": 400_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "deepseek": 128_000,
    "claude": 200_000,
    "gemini": 1_048_576,
    "qwen2.5-coder": 32_768,
    "qwen3": 32_768,
    "llama-3.1": 128_000,
    "llama3.1": 128_000,
    "llama3": 8_192,
}
DEFAULT_WINDOW = 32_768
MASK_AT = 0.65
"""Share of the window at which old tool outputs start to be masked. Not sooner: a masked
output rewrites the prompt's middle, and a server that caches the prompt's start (llama.cpp,
OpenAI) reads all after it again; at 0.5 the demo's last step took 97 s of its 262."""
COMPACT_AT = 0.8
"""Share of the window at which older turns are summarised."""
PROMPT_MAX = 0.9
"""The most of the window a prompt may fill: the rest is the reply's. A prompt projected
past it is never sent."""
KEEP_TURNS = 4
"""Recent assistant turns (with their tool results) never masked or summarised."""
MASK_MIN_CHARS = 300
"""Outputs shorter than a stub are not worth masking."""
RULES_CAP = 4000
"""Characters of project rules pinned into the task state (the full text stays in the system prompt)."""
STUB_PREFIX = "[output of "
SUMMARIZE = (
    "You compress an agent's working conversation so it can continue with less context. "
    "Write a concise summary of what was done and learned: decisions, findings with file "
    "paths, what worked, what failed and why, and what remains to do. Keep exact names, "
    "paths and error messages. Do not invent anything. No preamble."
)


def window_for(model: str, configured: int | None = None) -> int:
    if configured:
        return configured
    name = model.lower().rsplit("/", 1)[-1]
    matches = [prefix for prefix in KNOWN_WINDOWS if name.startswith(prefix)]
    return KNOWN_WINDOWS[max(matches, key=len)] if matches else DEFAULT_WINDOW


@dataclass
class ContextKeeper(Guard):
    window: int
    rules: str = ""
    """The project's AGENT.md / AGENTS.md text: pinned through every compaction."""
    test_runners: tuple[str, ...] = ()
    """Test runners besides the known ones (workers/guards/test_runs.py), for the task state."""
    last_prompt_tokens: int = 0
    """As the endpoint reported for the last call: the only count trusted."""
    goal: str = ""
    """The first thing the agent was asked; pinned through every compaction."""
    chars_then: int = 0
    """The conversation's size in characters when the endpoint last reported its tokens."""

    def before_step(self, start: StepStart) -> LimitHit | None:
        return self.prepare(
            start.messages,
            start.facts,
            start.step,
            model=start.model,
            budget=start.budget,
            events=start.events,
        )

    def after_model(self, ask: ModelAsk, turn: AssistantTurn | None) -> None:
        if turn is not None and not ask.aside:
            self.observe(turn.usage.prompt_tokens, ask.messages)

    def observe(self, prompt_tokens: int, messages: list[Message]) -> None:
        self.last_prompt_tokens = prompt_tokens
        self.chars_then = _chars(messages)

    def projected(self, messages: list[Message]) -> float:
        """The next prompt's size: the last reported count, scaled by what was added since.

        One batch of long tool results can grow the prompt past the window in a single
        step; waiting for the endpoint to report that would be one step too late.
        """
        if not self.chars_then or not self.last_prompt_tokens:
            return _chars(messages) / CHARS_PER_TOKEN  # nothing reported yet: estimate
        return self.last_prompt_tokens * _chars(messages) / self.chars_then

    def prepare(
        self,
        messages: list[Message],
        facts: Sequence[Facts],
        step: int,
        *,
        model: Model,
        budget: Budget,
        events: Emitter,
    ) -> LimitHit | None:
        """Before a model call: mask, then compact if the prompt would still be too big;
        a stop when even that leaves a prompt the window cannot hold. Compaction asks
        `model` for the summary, spends `budget` and logs to `events`."""
        if self.projected(messages) < MASK_AT * self.window:
            return None
        mask(messages, KEEP_TURNS)
        if self.projected(messages) >= COMPACT_AT * self.window:
            self.compact(
                messages, facts, step, reason="threshold", model=model, budget=budget, events=events
            )
        if self.projected(messages) >= PROMPT_MAX * self.window:
            mask(messages, 1)  # last resort: only the latest turn's results stay whole

        def fits() -> bool:
            return self.projected(messages) < PROMPT_MAX * self.window

        if not fits():  # one batch of reads is more than the window: its largest go
            mask_latest(messages, fits)
        tokens = self.projected(messages)
        if tokens >= PROMPT_MAX * self.window:
            return LimitHit(
                "context",
                f"the next prompt would be about {tokens:.0f} tokens, more than the "
                f"{self.window}-token window holds even after masking and compaction",
            )
        return None

    def _cut_for_headroom(self, messages: list[Message]) -> int | None:
        """Keep as many recent turns as fit under the masking mark, at least one."""
        total = max(_chars(messages), 1)
        for keep in range(KEEP_TURNS, 0, -1):
            cut = _cut_index(messages, keep)
            if cut is None:
                continue
            tail_tokens = self.projected(messages) * _chars(messages[cut:]) / total
            if tail_tokens < MASK_AT * self.window or keep == 1:
                return cut
        return None

    def compact(
        self,
        messages: list[Message],
        facts: Sequence[Facts],
        step: int,
        *,
        reason: str,
        model: Model,
        budget: Budget,
        events: Emitter,
    ) -> bool:
        """Summarise all but the last turns; False when there is nothing old enough to fold."""
        cut = self._cut_for_headroom(messages)
        if cut is None:
            return False
        head = 1 if messages and messages[0]["role"] == "system" else 0
        if not self.goal:
            self.goal = next(
                (str(m["content"]) for m in messages[head:] if m["role"] == "user"), ""
            )
        old = messages[head:cut]
        started = time.monotonic()
        turn = model.complete(
            [
                {"role": "system", "content": SUMMARIZE},
                {"role": "user", "content": transcript(old)},
            ],
            [],
            CallOptions(timeout=budget.seconds_left()),
        )
        budget.spend(turn.usage.total)
        state = {
            "role": "user",
            "content": task_state(self.goal, self.rules, facts, self.test_runners)
            + "\n\n[Summary of the earlier work]\n"
            + turn.text.strip(),
        }
        tokens_before = int(self.projected(messages))
        messages[head:cut] = [state]
        # Until the endpoint reports again, scale its count by what was folded away.
        self.last_prompt_tokens = int(self.projected(messages))
        self.chars_then = _chars(messages)
        events.emit(
            Compaction(
                step=step,
                reason=reason,
                tokens_before=tokens_before,
                tokens_after=self.last_prompt_tokens,
                tokens_after_is_estimate=True,
                messages_folded=cut - head,
                summary_tokens=turn.usage.total,
                elapsed_s=round(time.monotonic() - started, 3),
                state=state["content"],
            )
        )
        return True


def task_state(
    goal: str, rules: str, facts: Sequence[Facts], test_runners: tuple[str, ...] = ()
) -> str:
    """The pinned block: built from the harness's own records, never from the model."""
    files = files_changed(facts)
    commands = [e for e in evidence(facts) if e.command is not None]
    tests = [e for e in commands if is_test_run(str(e.command), test_runners)]
    lines = ["[Task state, kept by gaffer from what it observed]", f"Goal: {goal.strip()}"]
    if rules.strip():
        capped = (
            rules.strip()
            if len(rules) <= RULES_CAP
            else rules.strip()[:RULES_CAP] + "\n…(cut; the full rules are in the system prompt)"
        )
        lines.append("Project rules (AGENT.md / AGENTS.md):\n" + capped)
    lines.append("Files changed: " + (", ".join(files) if files else "none yet"))
    if commands:
        shown = commands[-10:]
        lines.append(
            "Commands run"
            + (f" (last {len(shown)} of {len(commands)})" if len(commands) > 10 else "")
            + ":"
        )
        lines += [f"- `{c.command}` → {outcome(c)}" for c in shown]
    lines.append(
        "Last test result: "
        + (f"`{tests[-1].command}` → {outcome(tests[-1])}" if tests else "no test run yet")
    )
    return "\n".join(lines)


def mask(messages: list[Message], keep_turns: int) -> int:
    """Stub long tool outputs before the last `keep_turns` turns; returns how many."""
    cut = _cut_index(messages, keep_turns)
    if cut is None:
        return 0
    calls = {
        c["id"]: c["function"]
        for m in messages[:cut]
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or []
    }
    masked = 0
    for message in messages[:cut]:
        content = message.get("content") or ""
        if (
            message["role"] != "tool"
            or len(content) < MASK_MIN_CHARS
            or content.startswith(STUB_PREFIX)
        ):
            continue
        _stub(
            message,
            calls,
            f"elided to save context: {len(content)} characters; call it again if you need it",
        )
        masked += 1
    return masked


def mask_latest(messages: list[Message], fits: Callable[[], bool]) -> int:
    """Stub the latest turn's tool results, largest first, until `fits()`: a reply of a
    dozen reads at once can fill a small window by itself (the bench's explorer read 16
    files in its first reply and ended with no answer). Returns how many."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if last is None:
        return 0
    calls = {c["id"]: c["function"] for c in messages[last].get("tool_calls") or []}
    results = [m for m in messages[last + 1 :] if m["role"] == "tool"]
    masked = 0
    for message in sorted(results, key=lambda m: -len(m.get("content") or "")):
        content = message.get("content") or ""
        if fits() or len(content) < MASK_MIN_CHARS:
            break
        _stub(message, calls, _TOO_BIG.format(chars=len(content)))
        masked += 1
    return masked


_TOO_BIG = (
    "not shown: with the other results of this reply it is more than the window holds "
    "({chars} characters); call it again alone if you need it"
)


def _stub(message: Message, calls: dict[str, Any], why: str) -> None:
    """A tool result replaced by a line naming its call and why it is not shown."""
    function = calls.get(message.get("tool_call_id", ""), {"name": "a tool", "arguments": ""})
    message["content"] = stub(function["name"], str(function.get("arguments", "")), why)


def stub(name: str, arguments: str, why: str) -> str:
    """The line a result not shown is replaced by: its call, and why."""
    return f"{STUB_PREFIX}{name} {' '.join(arguments.split())[:120]} {why}]"


def transcript(messages: list[Message], per_message: int = 2000) -> str:
    parts = []
    for message in messages:
        content = str(message.get("content") or "")
        if len(content) > per_message:
            content = content[:per_message] + f"… ({len(content) - per_message} more characters)"
        line = f"{message['role'].upper()}: {content}"
        for call in message.get("tool_calls") or []:
            line += f"\n  → {call['function']['name']}({call['function']['arguments'][:300]})"
        parts.append(line)
    return "\n\n".join(parts)


def _cut_index(messages: list[Message], keep_turns: int) -> int | None:
    """Where the last `keep_turns` assistant turns begin, if anything older exists to fold."""
    starts = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if len(starts) <= keep_turns:
        return None
    cut = starts[-keep_turns]
    first_real = 1 if messages and messages[0]["role"] == "system" else 0
    return cut if cut > first_real + 1 else None


def _chars(messages: list[Message]) -> int:
    return sum(
        len(str(m.get("content") or "")) + len(json.dumps(m.get("tool_calls") or []))
        for m in messages
    )
