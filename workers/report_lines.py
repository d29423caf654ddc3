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
REPORTED_NOT_LOOKED_INTO = "files it names that none of its calls looked inside: "
"""How a report says which files a reader named from the map, a listing or a name alone
(workers/guards/citations.py), on a line of gaffer's own: its answer there is a guess."""
# The claims gaffer's citations make (workers/guards/citations.py), read back: a file
# named unread, a name placed in a file, a name said not to be there, an answer made
# without looking. Written there and read here only.
LEFT_OUT = "Left out of the workers' answers, as nothing they did bears it out: "
"""How an answer made of workers' answers (workers/aids/joined_reports.py) says, after
them, what of them gaffer left out."""
_UNREAD = re.compile(r"it names (\S+), which ")
_PLACED = re.compile(r"it puts (\S+) in (\S+?);|marks unsupported: (\S+) in (\S+?)(?:;|$)")
_ABSENT = re.compile(r"it says (\S+) is not there")
BLIND = "it answered without looking at the code"
_HEADER = re.compile(r"^worker (\S+) \((\S+)\): (\S+) after ")
CUT_NOTE = "characters cut so the result fits"
"""What workers/executor.py says where it cut a result: a report so cut is not whole."""


@dataclass(frozen=True)
class Denied:
    """What a report's unsupported claims deny."""

    files: frozenset[str] = frozenset()
    """Files named without being opened."""
    placed: frozenset[tuple[str, str]] = frozenset()
    """(name, file): a name placed in a file the map or a worker denies."""
    absent: frozenset[str] = frozenset()
    """Names said not to be there, with no search that found nothing."""
    blind: bool = False
    """The answer was made without a look at the code: all of it is unsupported."""

    def pairs(self) -> set[tuple[str, str]]:
        """As (name, file), ("", file) for a file named unread."""
        return set(self.placed) | {("", file) for file in self.files}


def denied_in(claims: str) -> Denied:
    """What the unsupported claims of a report's line deny."""
    claims += ";"
    placed = {(m[0] or m[2], m[1] or m[3]) for m in _PLACED.findall(claims)}
    return Denied(
        files=frozenset(path.rstrip(",;") for path in _UNREAD.findall(claims)),
        placed=frozenset(placed),
        absent=frozenset(_ABSENT.findall(claims)),
        blind=BLIND in claims,
    )


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

    not_looked_into: frozenset[str] = frozenset()
    """Files its answer names that none of its calls looked inside."""

    whole: bool = True
    """False: the report was cut to fit a window, and its answer may not be all there."""

    @property
    def denied(self) -> Denied:
        return denied_in(self.unsupported)


def read_report(report: str) -> ReadReport | None:
    """The report's worker, ending, marks and answer; None when it is not a report."""
    lines = report.splitlines()
    if not lines or (header := _HEADER.match(lines[0])) is None:
        return None
    reason = unsupported = ""
    answer: list[str] = []
    not_looked_into: frozenset[str] = frozenset()
    whole = True
    in_answer = False
    answered = False  # gaffer's lines about the worker all come before its answer
    for line in lines[1:]:
        whole = whole and CUT_NOTE not in line
        if in_answer and line.startswith(QUOTE.rstrip()):
            answer.append(line.removeprefix(QUOTE.rstrip()).removeprefix(" "))
            continue
        in_answer = False
        if line.startswith(ANSWER_HEADING):
            in_answer = answered = True
        elif answered:
            continue
        elif line.startswith("reason: ") and not reason:
            reason = line.removeprefix("reason: ")
        elif line.startswith(REPORTED_UNSUPPORTED) and not unsupported:
            unsupported = line.removeprefix(REPORTED_UNSUPPORTED)
        elif line.startswith(REPORTED_NOT_LOOKED_INTO) and not not_looked_into:
            files = line.removeprefix(REPORTED_NOT_LOOKED_INTO).split(", ")
            not_looked_into = frozenset(path for path in files if path)
    return ReadReport(
        worker=header.group(1),
        status=header.group(3),
        reason=reason,
        unsupported=unsupported,
        answer="\n".join(answer).strip(),
        not_looked_into=not_looked_into,
        whole=whole,
    )


def names_denied(text: str, denied: Denied, container_root: str | None) -> bool:
    """Whether `text` carries a claim `denied` denies: it names a file named unread,
    places a denied name in its file, or names a name said not to be there."""
    paths = [p.strip("/") for p in named_paths(text, container_root)]
    for name, file in denied.pairs():
        written = re.search(rf"(?<![\w/.-]){re.escape(file.strip('/'))}(?![\w/-]|\.\w)", text)
        named = written or any(same_file(path, file) for path in paths)
        if named and (not name or name in text):  # `supervisor/delegation`: no path for named_paths
            return True
    return any(re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", text) for name in denied.absent)


def same_file(named: str, known: str) -> bool:
    """`loop.py` or `workers/loop.py` names `workers/loop.py`; a folder names itself."""
    named, known = named.strip("/"), known.strip("/")
    return named == known or known.endswith("/" + named) or named.endswith("/" + known)
