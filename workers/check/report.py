"""The check's verdict from what its run left: pytest's JUnit XML where it wrote one (read
as a plain file, never through a link or a pipe, and capped), else the last summary line
a runner printed. A run passes only with more than 0 tests passed and none failed."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import stat
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Verdict = Literal["verified", "failed", "timed_out", "unchecked"]
# A report larger than this is not a test run's: read no further.
MAX_REPORT_BYTES = 64 * 1024 * 1024


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


def read_plain(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes, up to `limit`; None for anything else (a link, a FIFO, a
    folder, a file past the limit, or nothing there). Never blocks on a pipe."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    with contextlib.closing(os.fdopen(fd, "rb")) as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = handle.read(limit + 1)
    return data if len(data) <= limit else None


def judged(found: CheckRun, output: str, junit: Path | None) -> CheckRun:
    """The verdict from the report, else the summary line, with the exit code."""
    counts = _junit_counts(junit) if junit is not None else _summary_counts(output)
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
    data = read_plain(path, MAX_REPORT_BYTES)
    if data is None:
        return None
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError:
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


# What of a failed check's output goes back to the agent: its first failure, not the log.
MAX_FAILURE_CHARS = 1_500


def failed_because(check: CheckRun) -> str:
    """Why a check failed, in a line for the agent: its counts and the failure, cut."""
    if check.verdict == "timed_out":
        return f"it did not end within {check.seconds:.0f}s"
    counts = f"{check.failed} failed, {check.passed} passed" if check.failed is not None else ""
    detail = check.detail.strip()
    if len(detail) > MAX_FAILURE_CHARS:
        detail = detail[:MAX_FAILURE_CHARS] + " …"
    return "; ".join(part for part in (counts, detail or f"exit {check.exit}") if part)
