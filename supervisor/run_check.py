"""The run's check (workers/check/checker.py): held by every agent of a run that could
change files, run when one that changed files answers, and again at the run's end over the
final workspace. The top agent's last `check` line is what the exit code, the JSON and the
last stderr line read. Any run that could change files is checked at its end, whether or
not it did: a fix that changed nothing over failing tests has failed."""

from __future__ import annotations

from typing import Any

from workers.assembly.specs import AgentSpec
from workers.check.report import CheckRun


def could_change_files(top: AgentSpec, specs: dict[str, AgentSpec]) -> bool:
    """The top agent edits, or may delegate to a worker that edits."""
    if top.changes_files:
        return True
    return top.may_delegate and any(
        spec.changes_files and spec.refusal is None and not spec.may_delegate
        for spec in specs.values()
    )


def check_json(check: CheckRun) -> dict[str, Any]:
    """The check gaffer ran, as scripts read it."""
    return {
        "verdict": check.verdict,
        "command": check.command or None,
        "source": check.source or None,
        "exit": check.exit,
        "passed": check.passed,
        "failed": check.failed,
        "seconds": round(check.seconds, 3),
        "detail": check.detail or None,
    }
