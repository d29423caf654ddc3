"""How an agent's run ended: a small closed family the CLI maps to exit codes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LimitName = Literal["steps", "time", "tokens", "cost", "repetition", "context", "output"]
Status = Literal["completed", "limit", "timeout", "cancelled", "interrupted", "failed"]


@dataclass(frozen=True)
class Finished:
    answer: str


@dataclass(frozen=True)
class LimitHit:
    limit: LimitName
    detail: str
    answer: str = ""
    """What the agent said last, when it had a chance to wrap up."""


@dataclass(frozen=True)
class Aborted:
    reason: str


@dataclass(frozen=True)
class Interrupted:
    """Ended from outside, not by the agent or the user: the cluster node it ran on was lost."""

    reason: str


@dataclass(frozen=True)
class Failed:
    error: str
    kind: str = "internal"


Outcome = Finished | LimitHit | Aborted | Interrupted | Failed


def status_of(outcome: Outcome) -> Status:
    match outcome:
        case Finished():
            return "completed"
        case LimitHit(limit="time"):
            return "timeout"
        case LimitHit():
            return "limit"
        case Aborted():
            return "cancelled"
        case Interrupted():
            return "interrupted"
        case Failed():
            return "failed"


def reason_of(outcome: Outcome) -> str:
    match outcome:
        case Finished():
            return "finished"
        case LimitHit(limit=limit, detail=detail):
            return f"{limit} limit: {detail}"
        case Aborted(reason=reason) | Interrupted(reason=reason):
            return reason
        case Failed(error=error):
            return error
