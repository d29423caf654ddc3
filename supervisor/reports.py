"""A worker's report to its caller, written by the harness from what it observed
(status, files changed, commands and their exit codes, the gate's verdict, tokens),
never by the worker's model; its final answer comes last, as the worker's own words."""

from __future__ import annotations

from supervisor.scheduler import WorkerRun
from workers.facts import Facts
from workers.verification import evidence, judge, outcome


def _commands(facts: list[Facts]) -> list[Facts]:
    """Every command the worker (and its own workers) ran, in order."""
    return [e for e in evidence(facts) if e.command is not None]


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
    if report.status != "completed":
        lines.append(f"reason: {report.reason}")
    lines.append("files changed: " + (", ".join(files) if files else "none"))
    for moved in report.quarantined:
        lines.append(
            f"moved aside by gaffer: {moved.path} (the host would have run it on its own; "
            f"kept in {moved.moved_to})"
        )
    verdict = judge(result.facts, test_runners)
    if verdict is not None:
        lines.append(verdict.line.lower().replace("verification:", "verification (by gaffer):"))
    commands = _commands(result.facts)
    if commands:
        lines.append("commands: " + "; ".join(_describe_command(c) for c in commands))
    answer = getattr(result.outcome, "answer", "")
    lines.append("final answer:\n" + (answer.strip() if answer and answer.strip() else "(none)"))
    lines.append(
        "[gaffer: if the reports so far answer the job, reply now with your final answer; "
        "delegate only what is still missing]"
    )
    return "\n".join(lines)


def _describe_command(command: Facts) -> str:
    text = str(command.command)
    return f"`{text if len(text) <= 80 else text[:79] + '…'}` → {outcome(command)}"
