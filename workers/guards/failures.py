"""Where a failed test run failed, and how a long one is shown: its first failure's
assertion and the lines it points at, and pytest's summary in place of a cut that spends
the room on tracebacks."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from workers.guards.test_runs import is_test_run
from workers.tools.base import ToolError, ToolResult
from workers.tools.workspace import read_confined, relative, resolve

# Lines shown either side of the line a failure points at.
CONTEXT_LINES = 3
MAX_ERROR_LINES = 8
MAX_FOCUS_CHARS = 1500
# pytest's sections: its failures' tracebacks, and the one-line-a-test summary after them.
_TRACEBACKS = re.compile(r"^=+ (?:FAILURES|ERRORS) =+$", re.MULTILINE)
_SHORT_SUMMARY = re.compile(r"^=+ short test summary info =+$", re.MULTILINE)
_SAVED_AT = re.compile(r"the full output is in (\S+): read_file it")
# A summary longer than this (hundreds of failing tests) is left to the usual cut.
MAX_SUMMARY_CHARS = 4000
MAX_HEADER_CHARS = 600
SUMMARISED = (
    "[gaffer: the run printed {size} characters, more than is shown with where it failed; "
    "its {lines} lines of tracebacks are left out here ({whole})]"
)


def summarised(result: ToolResult, output: str, room: int | None) -> ToolResult:
    """A failed pytest run too long to show whole with its first failure pointed at (cut
    for the model, or longer than `room` less the pointer's own length), shown as what
    comes before its
    tracebacks, then its short summary and counts: a better cut than head and tail, which
    spends the room on the first tracebacks (pytest prints each failing test's whole
    function, docstring and all), and which a small model pays for in prompt time. The
    result as it was when it fits, when the output has no such summary, when the whole
    output could not be read back (`output` is then the cut itself), or when the summary
    would not be shorter."""
    saved = result.facts.output_file
    if saved and output == result.output:
        return result  # cut, and the whole could not be read back
    if not saved and (room is None or len(result.output) <= room):
        return result  # it fits, with where it failed
    tracebacks = _TRACEBACKS.search(output)
    summary = next(reversed(list(_SHORT_SUMMARY.finditer(output))), None)  # pytest's, last
    if tracebacks is None or summary is None or summary.start() < tracebacks.start():
        return result
    ending = output[summary.start() :].rstrip()
    if len(ending) > MAX_SUMMARY_CHARS:
        return result
    header = output[: tracebacks.start()].rstrip()
    if len(header) > MAX_HEADER_CHARS:
        header = "…" + header[-MAX_HEADER_CHARS:]
    left_out = output[tracebacks.start() : summary.start()].count("\n")
    whole = "run one failing test alone to see its traceback"
    if saved:
        # The path as the model's own sandbox names it, from the cut this replaces: the
        # marker naming the saved file, not one the tests printed.
        named = [m.group(1) for m in _SAVED_AT.finditer(result.output)]
        where = next((p for p in named if os.path.basename(p) == os.path.basename(saved)), saved)
        whole = f"the whole output is in {where}"
    said = SUMMARISED.format(size=len(output), lines=left_out, whole=whole)
    footer = result.output.rstrip().rsplit("\n", 1)[-1]  # "[exit code 1; 0.2s]"
    shown = "\n".join(part for part in (header, said, ending, footer) if part)
    return dataclasses.replace(result, output=shown) if len(shown) < len(result.output) else result


# pytest: "tests/test_calc.py:5: AssertionError"; tracebacks: 'File "/x/calc.py", line 3'
_PYTEST_AT = re.compile(r"^(?P<file>[^\s:]+\.py):(?P<line>\d+): (?P<what>\S.*)$", re.MULTILINE)
_TRACEBACK_AT = re.compile(r'File "(?P<file>[^"]+\.py)", line (?P<line>\d+)')
_ERROR_LINE = re.compile(r"^E {2,}(?P<text>.*)$", re.MULTILINE)
_SUMMARY = re.compile(r"^(FAILED|ERROR) .*$", re.MULTILINE)


def failure_focus(
    workspace: Path,
    command: str,
    output: str,
    container_root: str | None = None,
    shown: str = "",
    test_runners: tuple[str, ...] = (),
) -> str:
    """For a failed test run: the first failure's assertion and the lines it points at, as
    a block to add to the result; '' when there is nothing to point at. What the model
    already sees (`shown`, the result as it was cut) is not repeated."""
    if not is_test_run(command, test_runners):
        return ""
    errors = [m.group("text") for m in _ERROR_LINE.finditer(output)][:MAX_ERROR_LINES]
    summary = [m.group(0) for m in _SUMMARY.finditer(output)][:3]
    where = _first_location(workspace, output, container_root)
    if not errors and where is None:
        return ""
    lines = ["[gaffer: where the first failure is]"]
    if where is not None:
        rel, number, what = where
        lines.append(f"{rel}:{number}: {what}".rstrip(": "))
    lines += [f"E   {text}" for text in errors if text not in shown]
    if where is not None:
        lines.append(_around(workspace, where[0], where[1]))
    lines += [line for line in summary if line not in shown]
    block = "\n".join(lines)
    return block if len(block) <= MAX_FOCUS_CHARS else block[: MAX_FOCUS_CHARS - 1] + "…"


def _first_location(
    workspace: Path, output: str, container_root: str | None
) -> tuple[str, int, str] | None:
    found = [
        (m.start(), m.group("file"), int(m.group("line")), m.group("what"))
        for m in _PYTEST_AT.finditer(output)
    ]
    found += [
        (m.start(), m.group("file"), int(m.group("line")), "")
        for m in _TRACEBACK_AT.finditer(output)
    ]
    for _, name, number, what in sorted(found):
        if container_root and name.startswith(container_root + "/"):
            name = name[len(container_root) + 1 :]
        try:
            real = resolve(workspace, name)
        except ToolError:
            continue  # a library's frame, outside the project
        if real.is_file() and "site-packages" not in name:
            return relative(workspace, real), number, what
    return None


def _around(workspace: Path, rel: str, number: int) -> str:
    try:
        data = read_confined(workspace, rel, 2 * 1024 * 1024) or b""
    except ToolError:
        return ""
    lines = data.decode("utf-8", errors="replace").splitlines()
    first, last = max(1, number - CONTEXT_LINES), min(len(lines), number + CONTEXT_LINES)
    shown = [
        f"{'>' if n == number else ' '}{n:>4} | {lines[n - 1]}" for n in range(first, last + 1)
    ]
    return f"{rel}, lines {first}-{last}:\n" + "\n".join(shown) if shown else ""
