"""An agent as data: what it calls, with which tools, where they run and what holds it
back; and what a run of it came to. The loop that drives it is workers/loop.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workers.changes.change_sets import Change
from workers.changes.ignored_changes import IgnoredChange
from workers.changes.merging import Merged
from workers.changes.tracker import ChangeTracker
from workers.check.report import CheckRun
from workers.facts import Facts
from workers.guard_hooks import Guards
from workers.hooks import Aids
from workers.limits import Budget, Limits
from workers.log.events import Emitter
from workers.log.schema import UserMessage
from workers.model import Message, Model
from workers.outcome import Outcome
from workers.sandbox import Sandbox
from workers.stepping import Stepper
from workers.tools.base import Tool


@dataclass
class Agent:
    model: Model
    tools: dict[str, Tool[Any]]
    sandbox: Sandbox
    events: Emitter
    limits: Limits = field(default_factory=Limits)
    budget: Budget = field(default_factory=Budget)
    """Tokens, time and cancellation, shared with the agents above this one."""
    guards: Guards = field(default_factory=Guards)
    """What holds it back or judges it at the loop's call-level moments
    (workers/guard_hooks.py): the context keeper, the edit and repetition guards, the
    gate. Chosen by assembly."""
    max_output_chars: int | None = None
    """The most one tool result may hold (an eighth of the model's window); None: the
    tools' own maxima."""
    test_runners: tuple[str, ...] = ()
    """Test runners besides the known ones (workers/guards/test_runs.py)."""
    changes: ChangeTracker | None = None
    """What its calls changed in the workspace, seen by the harness; for agents whose
    tools can change files."""
    look_first: bool = False
    """Its first reply must be a tool call: a worker with a task about the code looks
    before it answers (small models otherwise answer from what they imagine)."""
    calls_first: bool = False
    """Its first reply must be a call of its own, even with files attached or found for
    it: a reader whose report is checked against its calls (workers/guards/citations.py)
    would otherwise answer, be sent back for it, and write the whole answer again."""
    aids: Aids = field(default_factory=Aids)
    """What steps in at the loop's seam (workers/hooks.py), chosen by assembly."""
    stepper: Stepper | None = None
    """Step mode: asked before its tool calls run (workers/stepping.py)."""

    def room_for_files(self) -> int:
        """Characters the files shown to it at once may take (attached, or asked about)."""
        return 2 * self.max_output_chars if self.max_output_chars else MAX_FILES_CHARS


@dataclass
class AgentResult:
    outcome: Outcome
    messages: list[Message]
    steps: int = 0
    tokens: int = 0
    tool_calls: int = 0
    facts: list[Facts] = field(default_factory=list)
    """What each tool call taught the harness (files written, exit codes), in order."""
    changes: list[Change] | None = None
    """What it changed in the workspace, its workers included; None when it could
    change nothing. An isolated editor's: what came into the workspace."""
    ignored_changes: list[IgnoredChange] = field(default_factory=list)
    """What it changed among git-ignored files and caches (workers/changes/ignored_changes.py)."""
    merge: Merged | None = None
    """An isolated editor's: how its change set came into the workspace, or why not."""
    node: str | None = None
    """The cluster node its tools ran on; None on this machine."""
    check: CheckRun | None = None
    """The run's check over its change, as gaffer ran it when it answered; None when it
    changed nothing or no check could run."""
    unsupported: tuple[str, ...] = ()
    """Claims of its answer gaffer found nothing behind in its own calls."""
    not_looked_into: tuple[str, ...] = ()
    """Files its answer names that none of its calls looked inside (a reader's)."""
    answer_alone: str | None = None
    """The answer as the agent gave it, before gaffer's verdict was said beside it (a
    script's `result`; the verdict has fields of its own)."""
    sent_back: str | None = None
    """Its last answer the gate sent back: what it had, should its time run out before
    it answers again."""


def tell(agent: Agent, messages: list[Message], content: str, *, source: str) -> None:
    """A message from the harness (or the user) to the model, logged so a resume sees it."""
    messages.append({"role": "user", "content": content})
    agent.events.emit(UserMessage(content=content, source=source))


# What the files shown to an agent at once may take when the model's window is not known;
# otherwise two tool results' share of it.
MAX_FILES_CHARS = 48_000


def first_task(messages: list[Message]) -> str:
    """The first thing the agent was asked."""
    return next((str(m["content"]) for m in messages if m["role"] == "user"), "")


def answer_unanswered(messages: list[Message], reason: str) -> None:
    """Every tool call gets a result, even when the run stopped mid-batch, so the
    conversation stays valid for a resume or another turn."""
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    for message in reversed(messages):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        for call in message["tool_calls"]:
            if call["id"] not in answered:
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": f"not run: {reason}"}
                )
        break
