"""A worker's report to its caller, written by the harness from what it observed
(status, files changed, commands and their exit codes, the gate's verdict, tokens),
never by the worker's model; its final answer comes last, as the worker's own words."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from supervisor.scheduler import WorkerRun
from workers.changes.merging import Merged
from workers.facts import Facts
from workers.guards.verification import evidence, files_changed, judge, outcome
from workers.log.events import Emitter
from workers.log.schema import DelegateEnd
from workers.report_lines import (
    ANSWER_HEADING,
    REPORTED_NOT_LOOKED_INTO,
    REPORTED_UNSUPPORTED,
    quoted,
)
from workers.sandbox.landing import take_back_line
from workers.tools.base import ToolResult


def _commands(facts: list[Facts]) -> list[Facts]:
    """Every command the worker (and its own workers) ran, in order."""
    return [e for e in evidence(facts) if e.command is not None]


def worker_report(
    events: Emitter,
    agent_id: str,
    profile: str,
    run: WorkerRun,
    tokens: int,
    started: float,
    test_runners: tuple[str, ...] = (),
) -> ToolResult:
    """The delegate call's result: the report, and the worker's facts as its evidence;
    its `delegate_end` line logged on the caller's side."""
    merge = run.result.merge
    if merge is not None and merge.conflicts:
        paths = ", ".join(c.path for c in merge.conflicts)
        run = dataclasses.replace(
            run,
            status="conflict",
            reason=f"its changes conflict with what is in the workspace now ({paths}); "
            "none of them were applied",
        )
    changes = run.result.changes
    # What the harness saw change; a worker abandoned mid-run has only its calls' facts.
    files = [c.path for c in changes] if changes is not None else files_changed(run.result.facts)
    labels = [c.label for c in changes] if changes is not None else files
    elapsed = time.monotonic() - started
    events.emit(
        DelegateEnd(
            child_id=agent_id,
            child_profile=profile,
            status=run.status,
            reason=run.reason,
            steps=run.result.steps,
            tokens=tokens,
            tool_calls=run.result.tool_calls,
            elapsed_s=round(elapsed, 3),
            files_changed=files,
        )
    )
    text = report_text(agent_id, profile, run, labels, tokens, elapsed, test_runners)
    return ToolResult(
        output=text,
        summary=f"{agent_id} {run.status}, {len(files)} file{'s' if len(files) != 1 else ''} changed",
        is_error=run.status != "completed",
        facts=Facts(
            worker=agent_id,
            status=run.status,
            modified=tuple(files),
            evidence=tuple(run.result.facts),
        ),
    )


# A report names this many ignored files at most; `gaffer diff` lists them all.
MAX_IGNORED_SHOWN = 20


def report_text(
    agent_id: str,
    profile: str,
    report: WorkerRun,
    files: list[str],
    tokens: int,
    elapsed: float,
    test_runners: tuple[str, ...] = (),
) -> str:
    """`files`: each changed file as the change set labels it (`a.py (modified)`)."""
    result = report.result
    lines = [
        f"worker {agent_id} ({profile}): {report.status} after {result.steps} "
        f"step{'' if result.steps == 1 else 's'}, "
        f"{elapsed:.1f}s, {tokens} tokens",
    ]
    if report.status != "completed":  # one line: a server's message cannot add one of gaffer's
        lines.append("reason: " + " ".join(report.reason.split()))
    lines.append("files changed: " + (", ".join(files) if files else "none"))
    if ignored := result.ignored_changes:
        shown = ", ".join(c.label for c in ignored[:MAX_IGNORED_SHOWN])
        more = (
            f", and {len(ignored) - MAX_IGNORED_SHOWN} more"
            if len(ignored) > MAX_IGNORED_SHOWN
            else ""
        )
        lines.append(f"git-ignored and cache files changed: {shown}{more}")
    if (merge := result.merge) is not None:
        lines.extend(_merge_lines(agent_id, merge))
    lines.extend(_moved_aside(report.quarantined))
    verdict = judge(result.facts, test_runners)
    if result.check is not None:  # gaffer ran the run's check over the worker's change
        lines.append(f"check (run by gaffer): {result.check.line()}")
    elif verdict is not None:
        # No check could run: its own test runs, as gaffer saw them (never "verified").
        lines.append("its own test runs: " + verdict.line.removeprefix("Verification: "))
    commands = _commands(result.facts)
    if commands:
        lines.append("commands: " + "; ".join(_describe_command(c) for c in commands))
    if result.unsupported:  # gaffer's own line: a worker's quoted words cannot forge it
        lines.append(REPORTED_UNSUPPORTED + "; ".join(result.unsupported))
    if result.not_looked_into:
        lines.append(REPORTED_NOT_LOOKED_INTO + ", ".join(result.not_looked_into))
    answer = getattr(result.outcome, "answer", "")
    lines.append(
        f"{ANSWER_HEADING}\n" + (quoted(answer) if answer and answer.strip() else "(none)")
    )
    lines.append(
        "[gaffer: if the reports so far answer the job, reply now with your final answer; "
        "delegate only what is still missing]"
    )
    return "\n".join(lines)


def _merge_lines(agent_id: str, merge: Merged) -> list[str]:
    """How an isolated editor's change set came into the workspace, or why not."""
    if merge.skipped is not None:
        return [f"its changes were not brought into the workspace: {merge.skipped}"]
    if not merge.conflicts:
        return ["it worked on a copy of its own; its changes are now in the workspace"]
    lines = [
        "it worked on a copy of its own, and its changes were NOT applied: they conflict "
        f"with changes already in the workspace. Its whole change set is in the run's "
        f"{agent_id}.diff; to resolve, delegate the same edit again against the workspace "
        "as it is now. The conflicts:"
    ]
    for conflict in merge.conflicts:
        lines.append(f"- {conflict.path}: {conflict.why}")
        if conflict.hunks:
            lines.append(conflict.hunks)
    return lines


def _describe_command(command: Facts) -> str:
    text = str(command.command)
    return f"`{text if len(text) <= 80 else text[:79] + '…'}` → {outcome(command)}"


# A build can make thousands of files; the log's `boundary` lines name every one.
MAX_MOVED_SHOWN = 20


def _moved_aside(quarantined: list[Any]) -> list[str]:
    """One line per path gaffer held back from the workspace, with why and the command
    that takes it back."""
    lines = [
        f"moved aside by gaffer: {moved.path} ({moved.why}; kept in {moved.moved_to}; "
        f"to take it: {take_back_line(moved.path, moved.moved_to)})"
        for moved in quarantined[:MAX_MOVED_SHOWN]
    ]
    if len(quarantined) > MAX_MOVED_SHOWN:
        more = len(quarantined) - MAX_MOVED_SHOWN
        lines.append(f"moved aside by gaffer: {more} more (the log's boundary lines name them)")
    return lines
