"""The answer to a question whose parts the harness handed out, made of the workers'
answers, for a small model.

Shown its workers' reports and asked to answer from them, the bundled 1.5B model writes
them out again: on the demo's survey, 151 s for one reply, and twice more when sent back,
because what it added was files no worker read ("frames.py: the frames that the worker
uses"). When the harness split the question (workers/aids/task_parts.py), each part's
answer is already a worker's, checked against its own calls. So the answer is those,
each under its part, less every sentence that carries a claim gaffer could not bear out;
what was left out is said at the end, as gaffer's, never as fact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from workers.guards.citations import LEFT_OUT, UNSUPPORTED
from workers.report_lines import ReadReport, names_denied, read_report

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
NOT_ANSWERED = "(worker {worker} ended {status}{reason})"


def joined_answer(
    groups: Sequence[Sequence[str]], reports: Sequence[str], container_root: str | None = None
) -> str | None:
    """`groups`: the parts each worker was given, in order; `reports`: their reports, in
    the same order. None when the reports cannot be read as the workers' (the model
    answers from them instead)."""
    read = [read_report(report) for report in reports]
    if len(read) != len(groups) or any(r is None for r in read):
        return None
    sections, left_out = [], []
    number = 1
    for parts, report in zip(groups, read, strict=True):
        assert report is not None
        heading = _heading(parts, number, alone=len(groups) == 1)
        number += len(parts)
        body = _kept(report, container_root)
        if report.unsupported:
            left_out.append(f"{report.worker}: {report.unsupported}")
        ended = _not_answered(report) if report.status != "completed" or not body else ""
        sections.append("\n".join(filter(None, [heading, body, ended])))
    if left_out:
        sections.append(LEFT_OUT + "; ".join(left_out))
    return "\n\n".join(sections)


def _heading(parts: Sequence[str], first: int, *, alone: bool) -> str:
    """What a worker's answer answers: its part, or its parts by number. One worker with
    every part answers them numbered as it was given them, with no heading."""
    if alone:
        return ""
    if len(parts) == 1:
        return f"{first}. {parts[0]}"
    return (
        "\n".join(f"{first + n}. {part}" for n, part in enumerate(parts)) + "\n(answered together:)"
    )


def _kept(report: ReadReport, container_root: str | None) -> str:
    """The worker's answer less its stamp and each sentence a mark of gaffer's denies."""
    denied = report.denied
    kept_lines = []
    for line in report.answer.splitlines():
        if line.startswith(UNSUPPORTED):
            continue  # its own stamp: said once, at the end, from gaffer's line
        sentences = [
            s for s in _SENTENCE.split(line) if not names_denied(s, denied, container_root)
        ]
        if kept := " ".join(sentences).rstrip():
            kept_lines.append(kept)
        elif not line.strip():
            kept_lines.append("")
    return "\n".join(kept_lines).strip()


def _not_answered(report: ReadReport) -> str:
    reason = f": {report.reason}" if report.reason else ""
    return NOT_ANSWERED.format(worker=report.worker, status=report.status, reason=reason)
