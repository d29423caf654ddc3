"""How a run ended, decided once: its status, its exit code and why.

The session writes it on its log's last line (`session_end`), and every view reads it
from there: the last stderr line, the JSON result, `gaffer logs`, `gaffer stats`, the
timeline page and the chat. So no view can say "completed" of a run that exited 3: the
word and the code are decided together, here, and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

from supervisor.exits import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_LIMIT,
    EXIT_LOG_LOST,
    EXIT_OK,
    EXIT_SHORTFALL,
    EXIT_UNVERIFIED,
    TERMINATED,
    terminated_by,
)
from workers.log.events import Record
from workers.log.reader import Line, lines_of, of_type
from workers.log.schema import CheckRan, DelegateEnd, Merge, ToolCalled, Verification
from workers.outcome import Aborted, Finished, LimitHit, Outcome, reason_of, status_of

# A run's status, what it means, and the exit code that goes with it. An agent's own
# statuses (workers/outcome.py) are the first six; the rest are a run's alone.
RUN_STATUSES: dict[str, str] = {
    "completed": "the answer came",
    "limit": "a limit stopped it",
    "timeout": "its time ran out",
    "cancelled": "interrupted by Ctrl-C",
    "interrupted": "ended from outside: its cluster node was lost",
    "failed": "an error ended it",
    "check_failed": "the answer came, but gaffer's check of its change failed",
    "incomplete": "the answer came, but something it started did not hold",
    "unverified": "the answer came, its change unverified under --require-verified",
    "terminated": "ended by a signal",
    "log_lost": "the answer came, but its log could not be written in full",
}
MAX_SAID = 5
"""Shortfalls named on stderr; the rest are counted."""


@dataclass(frozen=True)
class RunEnd:
    status: str
    exit_code: int
    reason: str
    """Why, in one line: what did not hold, what stopped it; "finished" for exit 0."""

    @property
    def meaning(self) -> str:
        """What it means, with the exit code: "the answer came (exit 0)"."""
        return f"{RUN_STATUSES.get(self.status, self.status)} (exit {self.exit_code})"

    def said(self, log: object) -> str:
        """The stderr line for a run that did not exit 0 ("" for one that did)."""
        if self.exit_code == EXIT_OK:
            return ""
        if self.status == "log_lost":
            return f"the answer is above, but the run log stopped at {log}: {self.reason}"
        return f"{_LEADS.get(self.status, '')}{self.reason} (log: {log})"


_LEADS = {
    "check_failed": "answered, but ",
    "incomplete": "answered, but ",
    "unverified": "answered, but the change is unverified: ",
    "limit": "stopped: ",
    "timeout": "stopped: ",
    "cancelled": "interrupted: ",
    "failed": "error: ",
    "interrupted": "error: ",
}


def decide(
    outcome: Outcome,
    records: list[Record],
    *,
    require_verified: bool = False,
    log_failure: str | None = None,
) -> RunEnd:
    """The run's end, from how its top agent ended and what its log says it started."""
    match outcome:
        case Finished() if log_failure is not None:
            return RunEnd("log_lost", EXIT_LOG_LOST, log_failure)
        case Finished() if said := shortfalls(records):
            status = "check_failed" if _check_failure(lines_of(records)) else "incomplete"
            return RunEnd(status, EXIT_SHORTFALL, "; ".join(said))
        case Finished() if require_verified and (why := unverified(records)):
            return RunEnd("unverified", EXIT_UNVERIFIED, why)
        case Finished():
            return RunEnd("completed", EXIT_OK, reason_of(outcome))
        case LimitHit():
            return RunEnd(status_of(outcome), EXIT_LIMIT, reason_of(outcome))
        case Aborted() if TERMINATED.is_set():
            code, name = terminated_by()
            return RunEnd("terminated", code, f"terminated ({name})")
        case Aborted():
            return RunEnd("cancelled", EXIT_INTERRUPTED, reason_of(outcome))
        case _:
            return RunEnd(status_of(outcome), EXIT_ERROR, reason_of(outcome))


def shortfalls(records: list[Record]) -> list[str]:
    """What the run started that did not hold, one phrase each: workers that did not
    complete, changes that conflicted or were not applied, commands that were denied, and
    a change whose last test run (or a command after it) failed."""
    lines = lines_of(records)
    said = [
        f"worker {end.child_id} ({end.child_profile}) ended {end.status}: {end.reason}"
        for _, end in of_type(lines, DelegateEnd)
        if end.status != "completed"
    ]
    said += [
        f"{line.agent_id}'s change was not applied ({merge.status}"
        + (
            f": {', '.join(str(c.get('path')) for c in merge.conflicts)})"
            if merge.conflicts
            else ")"
        )
        for line, merge in of_type(lines, Merge)
        if merge.status in ("conflict", "skipped")
    ]
    said += [
        f"{line.agent_id}'s command was denied: {called.label}"
        for line, called in of_type(lines, ToolCalled)
        if (called.facts or {}).get("denied")
    ]
    if (failed := _check_failure(lines)) is not None:
        said.append(failed)
    if len(said) > MAX_SAID:
        said = [*said[:MAX_SAID], f"{len(said) - MAX_SAID} more (see the log)"]
    return said


def _check_failure(lines: list[Line]) -> str | None:
    """How the run's own check failed, in a phrase; None when it did not: gaffer's check
    when it ran one, else the top agent's last test run its answer went out over."""
    checks = [check for line, check in of_type(lines, CheckRan) if line.parent_id is None]
    if checks and checks[-1].verdict != "unchecked":  # gaffer ran it: its verdict is the run's
        failed = checks[-1].verdict in ("failed", "timed_out")
        return f"the check {checks[-1].line}" if failed else None
    # A check that could not run (no Docker) says nothing: the agent's own runs do.
    top = [
        check
        for line, check in of_type(lines, Verification)
        if line.parent_id is None and check.action == "accepted"
    ]
    if top and top[-1].failed:  # the answer went out over a failing test run
        return f"the change failed its own checks: {top[-1].reason}"
    return None


def unverified(records: list[Record]) -> str:
    """Why an answer went out with its change unverified, or "" when none did."""
    lines = lines_of(records)
    if checks := [check for line, check in of_type(lines, CheckRan) if line.parent_id is None]:
        return checks[-1].detail if checks[-1].verdict == "unchecked" else ""
    accepted = [
        check
        for _, check in of_type(lines, Verification)
        if check.action == "accepted" and check.verdict == "unverified"
    ]
    return accepted[-1].reason if accepted else ""
