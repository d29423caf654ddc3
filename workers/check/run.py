"""gaffer runs the check itself, where the agent cannot steer it: in a fresh container of
the sandbox image, network off, over a copy of the final workspace in which the files the
task keeps are put back as they were at the start and every file that steers a test run
the agent made is gone. Its command, environment and caches are gaffer's: Python reads
no `__pycache__` of the tree (PYTHONPYCACHEPREFIX), and no user site.

The verdict is that run's report: pytest's JUnit XML, written to a folder gaffer names
outside the copy, else the runner's summary line. A run passes only with more than 0
tests passed and none failed; one that exits 0 with no report (code under test that
calls `os._exit(0)` as pytest imports it) has failed. What no harness can stop is code
under test lying to the runner in its own process: that is why the check runs after the
agent ends, in a container the agent never had.
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import shutil
import socket
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from workers import state
from workers.check.choose import Check
from workers.guards.test_runs import invocation, status_command
from workers.processes import owner_gone, owner_token
from workers.sandbox.container import ENVIRONMENT, WORKSPACE, confined
from workers.sandbox.leftovers import CHECK_LABEL, OWNER_LABEL
from workers.sandbox.options import DockerOptions

Verdict = Literal["verified", "failed", "timed_out", "unchecked"]
REPORT = "/gaffer-report"
# bash's exit status for a program it cannot find: the image lacks the runner, which says
# nothing of the change.
COMMAND_NOT_FOUND = 127
# What of the check's output is kept for the verdict's first failure and the log.
MAX_OUTPUT_CHARS = 20_000
# A workspace past this is not copied for a check: the run says so, unchecked.
MAX_COPY_BYTES = 2 * 1024**3
CHECKS = "checks"
# Folders never copied: git's own (no test reads it) and the state of another checker.
NOT_COPIED = frozenset({".git"})


@dataclass(frozen=True)
class CheckRun:
    verdict: Verdict
    command: str
    source: str
    exit: int | None = None
    passed: int | None = None
    failed: int | None = None
    seconds: float = 0.0
    detail: str = ""
    """The first failure, or why it failed or is unchecked."""
    put_back: tuple[str, ...] = ()
    """Kept tests and files that steer a test run which the run changed: the check ran them
    as they were at the start."""

    def line(self) -> str:
        """The verdict in the user's terms, one line."""
        counts = f"{self.passed} passed" if self.passed is not None else ""
        if self.failed:
            counts = f"{self.failed} failed, {counts}".rstrip(", ")
        said = {
            "verified": f"verified: `{self.command}` ({counts})",
            "failed": f"failed: `{self.command}` ({counts or f'exit {self.exit}'})",
            "timed_out": f"timed out: `{self.command}` after {self.seconds:.0f}s",
            "unchecked": f"unchecked: {self.detail}",
        }[self.verdict]
        lines = self.detail.splitlines() if self.verdict == "failed" else []
        # A report's first failure leads; a runner that counted nothing ends with its cause.
        shown = (lines[0] if self.passed is not None else lines[-1]) if lines else ""
        said += f"; {shown}" if shown else ""
        if self.put_back:
            named = ", ".join(self.put_back[:5]) + (" …" if len(self.put_back) > 5 else "")
            said += f"; changed kept tests: {named} (checked as they were; `gaffer undo` puts them back)"
        return said


def run_check(
    check: Check,
    workspace: Path,
    *,
    restored: dict[str, bytes | None],
    options: DockerOptions,
    seconds: float,
    docker_client: Any,
    uid: int | None = None,
) -> CheckRun:
    """Run `check` over a copy of `workspace` in which each path of `restored` holds the
    bytes it had at the start (None: it was not there, and is removed)."""
    changed = tuple(p for p, data in restored.items() if not _holds(workspace / p, data))
    done = _run_over_copy(check, workspace, restored, options, seconds, docker_client, uid)
    return dataclasses.replace(done, put_back=changed)


def _holds(path: Path, data: bytes | None) -> bool:
    """Whether `path` is as `data` says: a plain file with those bytes, or not there."""
    try:
        if data is None:
            return not os.path.lexists(path)
        return not path.is_symlink() and path.read_bytes() == data
    except OSError:
        return False


def _run_over_copy(
    check: Check,
    workspace: Path,
    restored: dict[str, bytes | None],
    options: DockerOptions,
    seconds: float,
    docker_client: Any,
    uid: int | None,
) -> CheckRun:
    # Named by its owner, so a later gaffer can prove a killed run's copy abandoned.
    folder = state.workspace_dir(workspace, CHECKS, f"{owner_token()}-{secrets.token_hex(4)}")
    try:
        copy, report = folder / "workspace", folder / "report"
        try:
            if (too_large := _copy(workspace, copy)) is None:
                _restore(copy, restored)
        except OSError as error:
            too_large = f"the workspace could not be copied for the check: {error}"
        if too_large is not None:
            return CheckRun("unchecked", check.command, check.source, detail=too_large)
        owner = os.stat(workspace)
        user = (owner.st_uid, owner.st_gid) if uid is None else (uid, uid)
        report.mkdir(mode=0o700)
        state.chown_tree(folder, *user)
        command, junit = _with_report(check.command)
        started = time.monotonic()
        exit_code, output = _run(docker_client, options, copy, report, command, user, seconds)
        took = time.monotonic() - started
        found = CheckRun("unchecked", check.command, check.source, exit_code, seconds=took)
        if exit_code is None:
            return _with(found, "timed_out", detail=f"no end within {seconds:.0f}s")
        return _judged(found, output, report / "junit.xml" if junit else None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def reap_checks(workspace: Path) -> list[str]:
    """Remove the copies of checks whose run was killed (their owner is proven gone)."""
    try:
        folder = state.workspace_dir(workspace, CHECKS)
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    removed = []
    for name in names:
        if owner_gone(name.rpartition("-")[0]):
            shutil.rmtree(folder / name, ignore_errors=True)
            removed.append(name)
    return removed


def _copy(workspace: Path, copy: Path) -> str | None:
    """The workspace copied, links as links; why not, when it is too large."""
    total = 0
    for folder, dirs, files in os.walk(workspace):
        dirs[:] = [d for d in dirs if d not in NOT_COPIED]
        total += sum(_size(os.path.join(folder, name)) for name in files)
        if total > MAX_COPY_BYTES:
            return f"the workspace is over {MAX_COPY_BYTES // 1024**3} GB, too large to copy"
    shutil.copytree(workspace, copy, symlinks=True, ignore=shutil.ignore_patterns(*NOT_COPIED))
    return None


def _size(path: str) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _restore(copy: Path, restored: dict[str, bytes | None]) -> None:
    """Each kept path as it was at the start, never through a link in the copy: a folder
    on its way that is now a link or a file is made a folder again (in the copy alone;
    where nothing is to be put, a link on the way leads out of the copy and is left)."""
    for rel, data in restored.items():
        parts = Path(rel).parts
        folders = [copy.joinpath(*parts[:depth]) for depth in range(1, len(parts))]
        in_the_way = [f for f in folders if f.is_symlink() or (f.exists() and not f.is_dir())]
        if in_the_way and data is None:
            continue
        for folder in folders:
            if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
                folder.unlink()
            folder.mkdir(exist_ok=True)
        target = copy / rel
        if os.path.lexists(target):
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
        if data is not None:
            target.write_bytes(data)


def _with_report(command: str) -> tuple[str, bool]:
    """The command with pytest told to write its JUnit report where gaffer reads it, when
    pytest is what decides its exit status."""
    words = status_command(command)
    found = invocation(words, frozenset()) if words else None
    if found is None or found.runner != "pytest":
        return command, False
    extra = f" --junitxml={REPORT}/junit.xml -p no:cacheprovider"
    return command + extra, True


def _run(
    docker_client: Any,
    options: DockerOptions,
    copy: Path,
    report: Path,
    command: str,
    user: tuple[int, int],
    seconds: float,
) -> tuple[int | None, str]:
    """The check's exit code (None past `seconds`) and its output's end."""
    from docker.types import Mount

    container = docker_client.containers.run(
        options.image,
        command=["bash", "-c", command],
        detach=True,
        user=f"{user[0]}:{user[1]}",
        working_dir=WORKSPACE,
        environment={**ENVIRONMENT, "PYTHONPYCACHEPREFIX": "/tmp/pycache"},
        network_mode="none",
        **confined(options.memory, options.cpus, options.pids),
        mounts=[
            Mount(target=WORKSPACE, source=str(copy), type="bind"),
            Mount(target=REPORT, source=str(report), type="bind"),
        ],
        labels={
            CHECK_LABEL: "1",
            OWNER_LABEL: owner_token(),
            "gaffer.host": socket.gethostname(),
        },
    )
    try:
        try:
            code: int | None = int(container.wait(timeout=seconds)["StatusCode"])
        except Exception:  # the SDK raises requests' timeout: the check did not end
            container.kill()
            code = None
        output = container.logs(tail=400).decode("utf-8", "replace")[-MAX_OUTPUT_CHARS:]
    finally:
        container.remove(force=True)
    return code, output


def _judged(found: CheckRun, output: str, junit: Path | None) -> CheckRun:
    """The verdict from the report, else the summary line, with the exit code."""
    counts = _junit_counts(junit) if junit is not None else _summary_counts(output)
    if counts is None and found.exit == COMMAND_NOT_FOUND:
        why = f"the sandbox image cannot run `{found.command}` (command not found)"
        return _with(found, "unchecked", detail=why)
    if counts is None:
        if found.exit != 0:
            return _with(found, "failed", detail=_last_lines(output))
        if junit is not None:
            return _with(found, "failed", detail="exit 0, but pytest wrote no report")
        return _with(found, "unchecked", detail=f"`{found.command}` said no count of tests")
    passed, failed, first = counts
    verdict: Verdict = "verified" if found.exit == 0 and failed == 0 and passed > 0 else "failed"
    why = first or ("no test ran" if passed == 0 else _last_lines(output))
    detail = "" if verdict == "verified" else why
    return CheckRun(
        verdict, found.command, found.source, found.exit, passed, failed, found.seconds, detail
    )


def _junit_counts(path: Path) -> tuple[int, int, str] | None:
    """(passed, failed, the first failure) from pytest's JUnit XML, or None."""
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = failed = skipped = 0
    for suite in suites:
        total += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
    first = ""
    for case in root.iter("testcase"):
        problem = case.find("failure")
        problem = problem if problem is not None else case.find("error")
        if problem is not None:
            name = f"{case.get('classname', '')}.{case.get('name', '')}".strip(".")
            first = f"{name}: {(problem.get('message') or '').strip()}"[:500]
            break
    return total - failed - skipped, failed, first


# Summary lines of runners other than pytest: (pattern, passed group, failed group).
_SUMMARIES = (
    re.compile(r"(?:(?P<failed>\d+) failed, )?(?P<passed>\d+) passed"),  # pytest, plain
    re.compile(r"test result: \w+\. (?P<passed>\d+) passed; (?P<failed>\d+) failed"),  # cargo
    re.compile(r"Tests:\s+(?:(?P<failed>\d+) failed, )?(?P<passed>\d+) passed"),  # jest
    re.compile(r"^Ran (?P<passed>\d+) tests?", re.MULTILINE),  # unittest
)


_UNITTEST_FAILED = re.compile(r"^FAILED \((?:failures=(\d+))?(?:, )?(?:errors=(\d+))?", re.M)


def _summary_counts(output: str) -> tuple[int, int, str] | None:
    """(passed, failed, "") from the last summary line a runner printed, or None."""
    for pattern in _SUMMARIES:
        matches = list(pattern.finditer(output))
        if not matches:
            continue
        found = matches[-1].groupdict()
        passed, failed = int(found["passed"]), int(found.get("failed") or 0)
        if pattern is _SUMMARIES[-1] and (bad := _UNITTEST_FAILED.search(output)):
            failed = sum(int(n or 0) for n in bad.groups())  # unittest counts runs, not passes
            passed -= failed
        return passed, failed, ""
    return None


def _last_lines(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return "\n".join(lines[-5:]) if lines else "no output"


def _with(found: CheckRun, verdict: Verdict, *, detail: str) -> CheckRun:
    return dataclasses.replace(found, verdict=verdict, detail=detail)
