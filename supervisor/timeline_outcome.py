"""What a run came to, for the top of its timeline page: its status and what its exit
meant, the final answer, the verification verdict, the files changed, and each worker
that failed, stopped short, or whose change conflicted or was not applied. From the log
alone, like the rest of the page (supervisor/timeline.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from supervisor.run_end import RunEnd
from workers.check.choose import SOURCE_WORDS
from workers.log.reader import Line, of_type
from workers.log.schema import (
    AgentEnd,
    AgentStart,
    ChangeSet,
    CheckRan,
    Merge,
    SessionEnd,
    ToolCalled,
    Verification,
)

# The answer is read in a box of its own that scrolls; a longer one is read in the log.
MAX_ANSWER_CHARS = 50_000
# Conflicting files named per worker; the rest are counted.
MAX_CONFLICTS = 50

# session_end's status: the kind the page colours it as, and what `gaffer run` exited with.
ENDINGS: dict[str, tuple[str, str]] = {
    "completed": ("completed", "the answer came (exit 0)"),
    "limit": ("limit", "a limit stopped it (exit 2)"),
    "timeout": ("limit", "its time ran out (exit 2)"),
    "cancelled": ("interrupted", "interrupted by Ctrl-C or a signal (exit 130, or 128 + it)"),
    "interrupted": ("interrupted", "ended from outside: its cluster node was lost (exit 1)"),
    "failed": ("failed", "an error ended it (exit 1)"),
}
NO_END = ("interrupted", "the log ends before the run did: killed, or still going")
SHORTFALL = "the answer came, but something it started did not hold (exit 3)"
CHECK_FAILED = "the answer came, but gaffer's check of its change failed (exit 3)"
UNVERIFIED = "the answer came, its change unverified (exit 0; 4 under --require-verified)"

# A worker's trouble, coloured: red for what failed or did not come in, amber for what
# stopped short or was left out.
TONES = {
    "failed": "red",
    "conflict": "red",
    "limit": "amber",
    "timeout": "amber",
    "cancelled": "amber",
    "interrupted": "amber",
    "skipped": "amber",
}


@dataclass
class Trouble:
    """A worker that did not hold: how, why, and the files its change conflicted in."""

    agent: str
    profile: str
    what: str
    """failed, limit, timeout, cancelled, interrupted; conflict or skipped for its merge"""
    tone: str
    """red or amber"""
    reason: str
    conflicts: list[dict[str, str]] = field(default_factory=list)
    """Each: path, why."""


@dataclass
class GateVerdict:
    """The last word on the top agent's answer: gaffer's own check, else the gate's."""

    verdict: str
    """The check's (verified, failed, timed_out, unchecked); else the gate's: verified,
    unverified, none (nothing changed), failed (sent back, never accepted), or unchecked
    (no verification in the log)"""
    tone: str
    """green, amber, red, or plain"""
    reason: str
    checked: bool = False
    """gaffer ran the check: the verdict is that run's."""


@dataclass
class RunOutcome:
    kind: str
    """The run's status (supervisor/run_end.py): completed, incomplete, check_failed,
    limit, failed, …"""
    tone: str
    """green for a clean answer, amber for one with a shortfall or a run stopped short,
    red for a failed run"""
    status: str
    """session_end's own status, or interrupted when the log has none"""
    reason: str
    meaning: str
    """What the end meant, and `gaffer run`'s exit code for it."""
    answer: str
    verdict: GateVerdict
    files: list[dict[str, str]]
    """Each: path, change, by (the agents that changed it)."""
    troubles: list[Trouble]


def outcome_of(lines: list[Line]) -> RunOutcome:
    ended = next((e for _, e in reversed(of_type(lines, SessionEnd))), None)
    top = [line for line in lines if not line.parent_id]
    troubles = _troubles(lines)
    verdict = _verdict(top)
    if ended is not None and ended.exit_code is not None:  # decided once, as the run exited
        end = RunEnd(ended.status, ended.exit_code, ended.reason)
        kind, meaning = end.status, end.meaning
        tone = "green" if end.exit_code == 0 else _TONES.get(end.status, "amber")
        if end.exit_code == 0 and verdict.verdict in ("unverified", "unchecked"):
            meaning = UNVERIFIED
    else:  # a log from before the run's end was written with its exit code
        kind, meaning, tone = _read_from_before(ended, lines, troubles, verdict)
    answers = [e.answer for _, e in of_type(top, AgentEnd)]
    answer = (answers[-1] if answers else None) or ""
    if len(answer) > MAX_ANSWER_CHARS:
        cut = len(answer) - MAX_ANSWER_CHARS
        answer = answer[:MAX_ANSWER_CHARS] + f"\n[... {cut} more characters in the log ...]"
    return RunOutcome(
        kind=kind,
        tone=tone,
        status=ended.status if ended else "interrupted",
        reason=ended.reason if ended else "",
        meaning=meaning,
        answer=answer,
        verdict=verdict,
        files=_files(lines),
        troubles=troubles,
    )


_TONES = {"failed": "red", "check_failed": "red"}


def _read_from_before(
    ended: SessionEnd | None, lines: list[Line], troubles: list[Trouble], verdict: GateVerdict
) -> tuple[str, str, str]:
    """The kind, meaning and tone of an older log's end, read from what it holds."""
    kind, meaning = ENDINGS.get(ended.status, NO_END) if ended else NO_END
    tone = {"completed": "green", "failed": "red"}.get(kind, "amber")
    if kind == "completed" and (troubles or _denied(lines)):
        kind, meaning, tone = "incomplete", SHORTFALL, "amber"
    checked_failed = verdict.checked and verdict.verdict in ("failed", "timed_out")
    if kind in ("completed", "incomplete") and checked_failed:  # gaffer's own check
        kind, meaning, tone = "check_failed", CHECK_FAILED, "red"
    if meaning == ENDINGS["completed"][1] and verdict.verdict in ("unverified", "unchecked"):
        meaning = UNVERIFIED
    return kind, meaning, tone


def _verdict(top: list[Line]) -> GateVerdict:
    """The check gaffer ran over the top agent's answer, else the gate's verdict."""
    ran = [e for _, e in of_type(top, CheckRan)]
    if ran and ran[-1].verdict != "unchecked":  # else the gate's word on its own evidence
        check = ran[-1]
        tone = "green" if check.verdict == "verified" else "red"
        where = f" ({SOURCE_WORDS[check.source]})" if check.source in SOURCE_WORDS else ""
        return GateVerdict(check.verdict, tone, check.line + where, checked=True)
    checks = [e for _, e in of_type(top, Verification)]
    if not checks:
        return GateVerdict(
            "unchecked", "plain", "no verification in the log (--no-verify, or no answer)"
        )
    last = checks[-1]
    if last.action == "sent_back":
        return GateVerdict("failed", "red", f"sent back, never accepted: {last.reason}")
    tone = {"verified": "green", "unverified": "amber"}.get(last.verdict, "plain")
    return GateVerdict(last.verdict, tone, last.reason)


def _files(lines: list[Line]) -> list[dict[str, str]]:
    """What changed in the workspace: each change set of an agent that worked in it, and
    each isolated editor's change that was applied (a conflicted one changed nothing)."""
    isolated = {line.agent_id for line, e in of_type(lines, AgentStart) if e.worktree}
    changes: list[tuple[str, list[Any]]] = [
        (line.agent_id, e.files)
        for line, e in of_type(lines, ChangeSet)
        if line.agent_id not in isolated
    ]
    changes += [
        (line.agent_id, e.files) for line, e in of_type(lines, Merge) if e.status == "applied"
    ]
    files: dict[str, dict[str, Any]] = {}
    for agent, changed in changes:
        for change in changed:
            if not isinstance(change, dict):
                continue
            path = str(change.get("path", ""))
            if change.get("old_path"):
                path = f"{change['old_path']} → {path}"
            row = files.setdefault(path, {"path": path, "change": "", "by": []})
            row["change"] = str(change.get("change", ""))
            if agent not in row["by"]:
                row["by"].append(agent)
    workers = {line.agent_id for line in lines if line.parent_id}
    for row in files.values():
        # A change made through workers is theirs, not the agent's above them.
        mine = [a for a in row["by"] if a in workers] or row["by"]
        row["by"] = ", ".join(mine)
    return list(files.values())


def _troubles(lines: list[Line]) -> list[Trouble]:
    """Each worker that did not complete, or whose merge conflicted or was skipped; a
    worker with no end in the log was interrupted."""
    said: dict[str, Trouble] = {}
    profiles = {line.agent_id: line.profile or "" for line, _ in of_type(lines, AgentStart)}
    ends = {line.agent_id: e for line, e in of_type(lines, AgentEnd) if line.parent_id}
    for line, _ in of_type(lines, AgentStart):
        worker = line.agent_id
        if not line.parent_id or worker in said:
            continue
        end = ends.get(worker)
        status, reason = (
            (end.status, end.reason) if end else ("interrupted", "the log ends while it runs")
        )
        if status != "completed":
            said[worker] = Trouble(
                worker, profiles[worker], status, TONES.get(status, "red"), reason
            )
    for line, merge in of_type(lines, Merge):
        if merge.status not in ("conflict", "skipped"):
            continue
        conflicts = [
            {"path": str(c.get("path", "")), "why": str(c.get("why", ""))}
            for c in merge.conflicts
            if isinstance(c, dict)
        ]
        if len(conflicts) > MAX_CONFLICTS:
            more = len(conflicts) - MAX_CONFLICTS
            conflicts = [*conflicts[:MAX_CONFLICTS], {"path": f"{more} more", "why": "see the log"}]
        why = merge.reason or (
            "its change conflicted with the workspace: nothing was written"
            if merge.status == "conflict"
            else "its change was not applied: cancelled first"
        )
        worker = line.agent_id
        before = said.get(worker)
        reason = f"{why}; {before.what}: {before.reason}" if before else why
        tone = "red" if merge.status == "conflict" or (before and before.tone == "red") else "amber"
        profile = profiles.get(worker, line.profile or "")
        said[worker] = Trouble(worker, profile, merge.status, tone, reason, conflicts)
    return list(said.values())


def _denied(lines: list[Line]) -> bool:
    """A command was denied: `gaffer run` counts it a shortfall too (exit 3)."""
    return any((e.facts or {}).get("denied") for _, e in of_type(lines, ToolCalled))
