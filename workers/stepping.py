"""Step mode (`gaffer run --step`): before an agent's tool calls run, someone decides
each one: run it, run it with other arguments, skip it (the model is told the user
skipped it), or stop the run. The loop asks; who answers (a terminal, a test) is the
caller's (supervisor/step_mode.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from workers.model import ToolCall
from workers.tools.base import ToolResult


@dataclass(frozen=True)
class Decision:
    action: Literal["run", "skip"]
    arguments: str | None = None
    """The user's arguments (raw JSON) instead of the model's; None keeps the model's."""


class StoppedByUser(Exception):
    """The user stopped the run at a step."""


class Stepper(Protocol):
    def decide(self, agent_id: str, calls: list[ToolCall]) -> list[Decision]:
        """One decision per call, in order; StoppedByUser to stop the run."""
        ...


SKIPPED = ToolResult(
    output="not run: the user skipped this call (step mode). Go on without it, or try another way.",
    summary="skipped by the user",
    is_error=True,
)


def edited_note(arguments: str) -> str:
    return f"[the user changed this call's arguments before it ran, to: {arguments}]\n"
