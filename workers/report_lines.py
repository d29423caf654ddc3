"""The lines of a worker's report that the harness reads back.

A report (supervisor/reports.py) is gaffer's own lines about a worker (how it ended, what
it changed, what gaffer's check says, which of its claims gaffer could not bear out)
followed by the worker's answer, each of its lines quoted. Only gaffer's lines are read
back as data: a worker that writes a line looking like one of them still has it quoted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from workers.guards.named_code import named_paths

QUOTE = "| "
"""How each line of a worker's own words begins in its report."""
ANSWER_HEADING = f"final answer (the worker's own words, each line after {QUOTE.strip()!r}):"
REPORTED_UNSUPPORTED = "unsupported claims (gaffer checked them against the worker's calls): "
"""How a report says what gaffer could not bear out, on a line of gaffer's own: the only
place that is read back from (the worker's own words, quoted, could forge the other)."""
_DENIED_PLACE = re.compile(r"it puts (\S+) in (\S+?);")
_DENIED_FILE = re.compile(r"it names (\S+), which none")
_HEADER = re.compile(r"^worker (\S+) \((\S+)\): (\S+) after ")


def quoted(text: str) -> str:
    """A worker's words with each line marked as theirs: a line it wrote to look like
    gaffer's own (a status, a verdict, a `[gaffer: …]` note) still reads as quoted."""
    return "\n".join(QUOTE + line for line in text.strip().splitlines())


@dataclass(frozen=True)
class ReadReport:
    """One worker's report, as the harness reads it back."""

    worker: str
    status: str
    reason: str
    unsupported: str
    """The claims gaffer marked unsupported, as the report says them ("" for none)."""
    answer: str
    """The worker's answer, unquoted ("" for none)."""

    @property
    def denied(self) -> set[tuple[str, str]]:
        return denied_in(self.unsupported)


def denied_in(claims: str) -> set[tuple[str, str]]:
    """What a report's unsupported claims deny: (name, file) placed there, or ("", file)
    named without being opened."""
    claims += ";"
    return set(_DENIED_PLACE.findall(claims)) | {
        ("", path.rstrip(",;")) for path in _DENIED_FILE.findall(claims)
    }


def read_report(report: str) -> ReadReport | None:
    """The report's worker, ending, marks and answer; None when it is not a report."""
    lines = report.splitlines()
    if not lines or (header := _HEADER.match(lines[0])) is None:
        return None
    reason = unsupported = ""
    answer: list[str] = []
    in_answer = False
    for line in lines[1:]:
        if in_answer and line.startswith(QUOTE.rstrip()):
            answer.append(line.removeprefix(QUOTE.rstrip()).removeprefix(" "))
            continue
        in_answer = False
        if line.startswith(ANSWER_HEADING):
            in_answer = True
        elif line.startswith("reason: ") and not reason:
            reason = line.removeprefix("reason: ")
        elif line.startswith(REPORTED_UNSUPPORTED):
            unsupported = line.removeprefix(REPORTED_UNSUPPORTED)
    return ReadReport(
        worker=header.group(1),
        status=header.group(3),
        reason=reason,
        unsupported=unsupported,
        answer="\n".join(answer).strip(),
    )


def names_denied(text: str, denied: set[tuple[str, str]], container_root: str | None) -> bool:
    """Whether `text` names a file, or places a name in one, that a report denies."""
    paths = [p.strip("/") for p in named_paths(text, container_root)]
    for name, file in denied:
        if any(same_file(path, file) for path in paths) and (not name or name in text):
            return True
    return False


def same_file(named: str, known: str) -> bool:
    """`loop.py` or `workers/loop.py` names `workers/loop.py`; a folder names itself."""
    named, known = named.strip("/"), known.strip("/")
    return named == known or known.endswith("/" + named) or named.endswith("/" + known)
