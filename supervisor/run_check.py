"""The run's check at its end (workers/check/): chosen once from the flag, the config, the
task's words or the project's files, run by gaffer in a fresh container over the final
workspace, and logged as the run's `check` line, which the exit code, the JSON and the
last stderr line read. Any run that could change files is checked, whether or not it did:
a fix that changed nothing over failing tests has failed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from workers.assembly.specs import AgentSpec
from workers.changes.tracker import ChangeTracker
from workers.check.choose import Check, NoCheck, choose
from workers.check.run import CheckRun, run_check
from workers.guards.task_rules import kept_tests
from workers.log.events import Emitter
from workers.log.schema import CheckRan
from workers.sandbox import SandboxUnavailable
from workers.sandbox.options import DockerOptions

# What decides a test run besides its tests: put back as they were at the start (or taken
# away when the agent made them) in the check's copy.
STEERING = frozenset(
    {"conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"}
    | {"sitecustomize.py", "usercustomize.py"}
)
# A suite that takes longer than this on the check's one CPU is stopped and the run says
# it timed out; the flag's own runs are the user's to size (--check-seconds is not yet).
CHECK_SECONDS = 300.0


def could_change_files(top: AgentSpec, specs: dict[str, AgentSpec]) -> bool:
    """The top agent edits, or may delegate to a worker that edits."""
    if top.changes_files:
        return True
    return top.may_delegate and any(
        spec.changes_files and spec.refusal is None and not spec.may_delegate
        for spec in specs.values()
    )


def check_at_end(
    workspace: Path,
    task: str,
    *,
    flag: str | None,
    config: str | None,
    tracker: ChangeTracker | None,
    runners: tuple[str, ...],
    options: DockerOptions,
    uid: int | None,
    events: Emitter,
) -> CheckRun:
    """Choose the check, run it, and log it; the run's verdict."""
    chosen = choose(workspace, task, flag=flag, config=config)
    if isinstance(chosen, NoCheck):
        done = CheckRun("unchecked", "", "", detail=chosen.reason)
    else:
        done = _run(chosen, workspace, task, tracker, runners, options, uid)
    events.emit(
        CheckRan(
            verdict=done.verdict,
            command=done.command or None,
            source=done.source or None,
            exit=done.exit,
            passed=done.passed,
            failed=done.failed,
            seconds=round(done.seconds, 3),
            detail=done.detail,
            line=done.line(),
        )
    )
    return done


def _run(
    check: Check,
    workspace: Path,
    task: str,
    tracker: ChangeTracker | None,
    runners: tuple[str, ...],
    options: DockerOptions,
    uid: int | None,
) -> CheckRun:
    from workers.sandbox.docker import client

    try:
        docker_client = client()
    except SandboxUnavailable as error:
        return CheckRun("unchecked", check.command, check.source, detail=f"no Docker: {error}")
    return run_check(
        check,
        workspace,
        restored=restored(workspace, task, tracker, runners),
        options=options,
        seconds=CHECK_SECONDS,
        docker_client=docker_client,
        uid=uid,
    )


def restored(
    workspace: Path, task: str, tracker: ChangeTracker | None, runners: tuple[str, ...]
) -> dict[str, bytes | None]:
    """What the check's copy holds in place of the workspace's own: the tests the task
    keeps and every file that steers a test run, as they were when the agent started
    (None: it was not there). Without a tracker (no agent could write), nothing."""
    if tracker is None:
        return {}
    kept = kept_tests(task, workspace, runners, by_command=True)
    at_start = set(tracker.started_with())
    now = set(tracker.store.scan())
    paths = {p for p in at_start | now if os.path.basename(p) in STEERING}
    if kept is not None:  # what the task keeps, deleted since or not
        paths |= {p for p in at_start if kept.keeps(p)}
        paths |= {p for p in now - at_start if kept.keeps(p, new=True)}
    found: dict[str, bytes | None] = {}
    for path in sorted(paths):
        if tracker.had(path):
            if (before := tracker.original(path)) is not None:
                found[path] = before
        else:
            found[path] = None
    return found


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
