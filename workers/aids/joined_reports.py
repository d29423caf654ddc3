"""The answer to a question whose parts the harness handed out, made of the workers'
answers, for a small model.

Shown its workers' reports and asked to answer from them, the bundled 1.5B model writes
them out again: on the demo's survey, 151 s for one reply, and twice more when sent back,
because what it added was files no worker read ("frames.py: the frames that the worker
uses"). When the harness split the question (workers/aids/task_parts.py), each part's
answer is already a worker's, checked by that worker's gate against its own calls. So
the answer is those, each under its part, less every sentence that carries a claim that
check denied (a file named unread, a name placed where the map says it is not, a name
said not to be there with no search); an answer made without a look is left out whole.
Where the harness had a first answer (task_parts.py), a part the workers left without
an answer gets its line, said to be unchecked; so does a part whose worker's item named
only files none of its calls looked inside, where the first answer names another.
What was left out is said after the answer, as gaffer's, never as fact.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from workers import numbered
from workers.guards.named_code import named_paths
from workers.report_lines import (
    ANSWER_HEADING,
    LEFT_OUT,
    REPORTED_NOT_LOOKED_INTO,
    REPORTED_UNSUPPORTED,
    Denied,
    ReadReport,
    names_denied,
    read_report,
    same_file,
)

CONTAINER_ROOT = "/workspace"
"""Where a reader in a container saw the workspace (workers/assembly/build.py)."""
# A sentence ends at . ! ? or ; before a space (a path's dots, `e.g.x`, stay whole).
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|(?<=[.!?;]\))\s+")
_LIST_MARK = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*•])\s+")
# Lines of gaffer's own, and lines that would read as them, in a worker's words: a
# worker's answer never brings them into the user's.
UNCHECKED = (
    "Unchecked (no worker's call bears these out; a first answer from a search of the code):"
)
FIRST_ANSWER_HEADING = (
    "A first answer from a search of the code's names and docstrings, which nobody has checked:"
)
CHECK_EACH_LINE = "Check each line with a call before you answer"
"""How a reader's task gives it the first answer's lines, and tells it to check them
(task_parts.py); a reader that copies them out is not answering."""
_GAFFERS = (
    FIRST_ANSWER_HEADING,
    CHECK_EACH_LINE,
    LEFT_OUT,
    REPORTED_UNSUPPORTED,
    REPORTED_NOT_LOOKED_INTO,
    ANSWER_HEADING,
    "Unsupported (",
    "Unchecked (",
    "[gaffer",
    "(worker ",
)
GUESSES = (
    "{worker}'s lines for {numbers} (they name no file, or only files none of its calls "
    "looked inside; the first answer's lines are given for them)"
)
_REPORT_HEADER = re.compile(r"^\s*worker \S+ \(\S+\): ")


@dataclass(frozen=True)
class Joined:
    answer: str
    left_out: tuple[str, ...]
    """What gaffer left out, each as `wN: the claims its check denied`, or as GUESSES
    says the items it gave the first answer's lines for."""


def joined_answer(
    groups: Sequence[Sequence[str]],
    reports: Sequence[str],
    drafted: Mapping[int, str] | None = None,
) -> Joined | None:
    """`groups`: the parts each worker was given, in order; `reports`: their reports, in
    the same order (a task that started no worker has its refusal there). None when no
    report can be read as a worker's (the model answers from them instead). `drafted`:
    the first answer, by part number (task_parts.py): a part no worker's
    answer has a line for, or only a guess (_without_guesses), gets its line, said to be
    unchecked."""
    if len(reports) != len(groups):
        return None
    read = [read_report(report) for report in reports]
    if all(r is None for r in read):
        return None
    sections, left_out, number = [], [], 1
    for parts, report, raw in zip(groups, read, reports, strict=True):
        heading = _heading(parts, number, alone=len(groups) == 1)
        numbers = range(number, number + len(parts))
        number += len(parts)
        if report is None:  # refused, or not started: its reason
            first = raw.strip().splitlines()[0] if raw.strip() else "no report"
            unchecked = _unchecked(drafted, numbers, "")
            sections.append(
                "\n".join(filter(None, [heading, f"(not answered: {first})", unchecked]))
            )
            continue
        body, guesses = _without_guesses(_kept(report), report, drafted, numbers)
        if report.unsupported:
            left_out.append(f"{report.worker}: {report.unsupported}")
        if guesses:
            left_out.append(GUESSES.format(worker=report.worker, numbers=guesses))
        ended = ""
        if body and report.status != "completed":
            ended = f"({report.worker} ended {report.status}" + (
                f": {report.reason})" if report.reason else ")"
            )
        unchecked = _unchecked(drafted, numbers, body, report.denied)
        nothing = _nothing(report, guessed=bool(guesses))
        sections.append("\n".join(filter(None, [heading, body or nothing, ended, unchecked])))
    return Joined("\n\n".join(sections), tuple(left_out))


def _without_guesses(
    body: str, report: ReadReport, drafted: Mapping[int, str] | None, numbers: range
) -> tuple[str, str]:
    """The kept answer less its item for each part that names no file, or only files
    none of the worker's calls looked inside, where the first answer's line for that
    part names another file and will be shown in its place; and those parts' numbers,
    said as a list ("" for none). Such an item is a guess from the map or a listing, and
    the first answer's, chosen among what a search by that part's own words found, is
    the better one: on the bench's click, a reader whose calls all failed put six of ten
    answers in one file from the map over a first answer that had eight right; on
    tenacity, a reader's answer of map lines with no path ("1. 147: class DoSleep") took
    the place of a first answer with nine of nine."""
    if not (drafted and body):
        return body, ""
    spans = numbered.item_spans(body) if len(numbers) > 1 else {numbers[0]: (0, len(body))}
    guessed = {
        n
        for n, (start, end) in spans.items()
        if n in numbers
        and n in drafted
        and _shown(drafted[n], report.denied)
        and _guess(body[start:end], drafted[n], report.not_looked_into)
    }
    if not guessed:
        return body, ""
    said = ", ".join(map(str, sorted(guessed)))
    kept = "" if len(numbers) == 1 else numbered.without_items(body, guessed).strip()
    # An opening line left alone ("From what I found:") says nothing without its items.
    return ("" if "\n" not in kept and kept.endswith(":") else kept), said


def _guess(item: str, drafted: str, not_looked_into: frozenset[str]) -> bool:
    """Whether a worker's item names no file, or only files its report says no call of
    its looked inside (the same path, not one of the same name elsewhere) and none the
    first answer's line names, where that line names one."""
    paths = [path.strip("/") for path in named_paths(item, CONTAINER_ROOT)]
    unseen = {path.strip("/") for path in not_looked_into}
    first = named_paths(drafted, None)
    return bool(first) and (
        not paths
        or (
            all(path in unseen for path in paths)
            and not any(same_file(path, file) for path in paths for file in first)
        )
    )


def _shown(drafted: str, denied: Denied | None) -> bool:
    """Whether a first answer's line may be shown: no claim in it the worker's check
    denied (a file not there, or named unread), and nothing that reads as gaffer's."""
    return not (denied and names_denied(drafted, denied, CONTAINER_ROOT)) and not (
        _reads_as_gaffers(drafted)
    )


def _unchecked(
    drafted: Mapping[int, str] | None, numbers: range, body: str, denied: Denied | None = None
) -> str:
    """The first answer's lines (those _shown) for the parts a worker's kept answer has
    no item for (all of them where it kept nothing; none for one part it answered),
    under gaffer's line saying no worker's call bore them out."""
    if not drafted:
        return ""
    given = set(numbered.item_spans(body)) if len(numbers) > 1 or not body else set(numbers)
    lines = [
        drafted[n]
        for n in numbers
        if n in drafted and n not in given and _shown(drafted[n], denied)
    ]
    return "\n".join([UNCHECKED, *lines]) if lines else ""


def _heading(parts: Sequence[str], first: int, *, alone: bool) -> str:
    """What a worker's answer answers: its part, or its parts by number. One worker with
    every part answers them numbered as it was given them, with no heading."""
    if alone:
        return ""
    if len(parts) == 1:
        return f"{first}. {parts[0]}"
    return f"{first}–{first + len(parts) - 1}. " + "; ".join(parts)


def _kept(report: ReadReport) -> str:
    """The worker's answer less each sentence a mark of gaffer's denies, and any line
    that reads as gaffer's own; an answer made without a look, none of it."""
    denied = report.denied
    if denied.blind or not report.whole:
        return ""
    kept_lines, fenced = [], False
    for line in report.answer.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if _reads_as_gaffers(line):
            continue
        if fenced or line.lstrip().startswith("```"):  # code as written, or not at all
            if not names_denied(line, denied, CONTAINER_ROOT):
                kept_lines.append(line)
            continue
        mark = m.group() if (m := _LIST_MARK.match(line)) else ""
        sentences = [s for s in _SENTENCE.split(line[len(mark) :]) if s.strip()]
        kept = [s for s in sentences if not names_denied(s, denied, CONTAINER_ROOT)]
        if kept:
            kept_lines.append(mark + " ".join(kept))
        elif not line.strip():
            kept_lines.append("")
    return "\n".join(kept_lines).strip()


def _reads_as_gaffers(line: str) -> bool:
    """Whether a worker's line reads as one of gaffer's, behind a list mark or markup
    too ("3. Unsupported (…", "**Left out…**")."""
    bare = _LIST_MARK.sub("", line, count=1).lstrip(" \t*#>_`")
    return any(
        text.lstrip().startswith(_GAFFERS) or _REPORT_HEADER.match(text) for text in (line, bare)
    )


def _nothing(report: ReadReport, *, guessed: bool = False) -> str:
    """What stands for a worker's answer when none of it is left (`guessed`: what it had
    named only files none of its calls looked inside)."""
    if guessed:
        return (
            f"({report.worker}'s answer named no file, or only files none of its calls "
            "looked inside)"
        )
    if report.denied.blind:
        return f"({report.worker} answered without looking at the code: its answer is left out)"
    if not report.whole:
        return f"({report.worker}'s report was cut to fit: see its answer in the log)"
    if report.answer and report.status == "completed":
        return f"(nothing {report.worker} said could be borne out: see the end)"
    reason = f": {report.reason}" if report.reason else ""
    return f"({report.worker} gave no answer; it ended {report.status}{reason})"
