"""What `gaffer run` leaves on stdout and stderr when it ends, for a person or a script.

`--output-format text` (the default): the answer alone on stdout. `json`: one object
at the end (answer, status, reason, exit code, tokens, files changed, log path).
`stream-json`: every logged event as one JSON line as it happens (without whole file
contents), then that same object as a `result` line. These are the habits of
`claude -p --output-format`, `codex exec --json` and pi's json mode. Every run ends with
one summary line on stderr unless `--quiet`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any, Literal, NoReturn

from supervisor.exits import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_LIMIT,
    EXIT_LOG_LOST,
    EXIT_OK,
    TERMINATED,
    terminated_by,
)
from supervisor.session import Session
from supervisor.terminal import echo
from workers.log.events import LOGGED_EVENTS, Record
from workers.log.reader import events_of, lines_of, of_type
from workers.log.schema import ChangeSet, DelegateEnd, DelegateStart, SessionEnd, ToolCalled
from workers.outcome import Aborted, Failed, Finished, LimitHit, Outcome, reason_of, status_of

OutputFormat = Literal["text", "json", "stream-json"]
FORMATS = ("text", "json", "stream-json")
# What holds whole files or a conversation's state: the log has it, a stream does not.
_HEAVY = {"tool_call": ("content",), "compaction": ("state",)}
_HEAVY_ARGS = ("content", "old_text", "new_text")


class JsonLines:
    """A subscriber printing each logged event on stdout as one JSON line; a reader that
    goes away (`| head -1`) ends the stream, never the run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gone = False

    def __call__(self, record: Record) -> None:
        if record["event"] not in LOGGED_EVENTS or self._gone:
            return
        shown = {k: v for k, v in record.items() if k not in _HEAVY.get(record["event"], ())}
        if isinstance(args := shown.get("args"), dict):
            shown["args"] = {k: v for k, v in args.items() if k not in _HEAVY_ARGS}
        # ASCII escapes: a file name that is not UTF-8 cannot break the stream.
        line = json.dumps(shown, default=str)
        with self._lock:
            try:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
            except OSError:
                self._gone = True


def finish(
    session: Session, outcome: Outcome, output: OutputFormat, quiet: bool, shown: str = ""
) -> NoReturn:
    """Print what the run came to, in the asked format, and exit with its code. `shown`:
    the answer as the terminal view already streamed it to stderr."""
    code, problem = _exit_of(session, outcome)
    answer = getattr(outcome, "answer", None) or None
    printable = answer is not None and not isinstance(outcome, Aborted | Failed)
    if output == "text":
        if printable and (rest := _not_yet_shown(str(answer), shown)):
            echo(rest)
    else:
        result = _result(session, outcome, answer, code, problem)
        if output == "stream-json":
            result = {"event": "result", **result}
        echo(json.dumps(result, default=str))
    if problem:
        echo(f"gaffer: {problem}", err=True)
    if not quiet:
        echo(f"gaffer: {_summary(session, outcome)}", err=True)
    sys.exit(code)


def _not_yet_shown(answer: str, shown: str) -> str:
    """The answer, less what the terminal already shows of it when stdout is that same
    terminal: the streamed reply is not printed twice, only what the gate added."""
    streamed = shown.strip()
    if streamed and _one_terminal() and answer.strip().startswith(streamed):
        return answer.strip()[len(streamed) :].strip()
    return answer


def _one_terminal() -> bool:
    """stdout and stderr are the same terminal: what is on one is on screen already."""
    try:
        if not (sys.stdout.isatty() and sys.stderr.isatty()):
            return False
        return os.path.samestat(os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno()))
    except (OSError, ValueError):
        return False


def _exit_of(session: Session, outcome: Outcome) -> tuple[int, str]:
    log = session.log.path
    match outcome:
        case Finished() if session.log.failure is not None:
            return EXIT_LOG_LOST, (
                f"the answer is above, but the run log stopped at {log}: {session.log.failure}"
            )
        case Finished():
            return EXIT_OK, ""
        case LimitHit():
            return EXIT_LIMIT, f"stopped: {reason_of(outcome)} (log: {log})"
        case Aborted() if TERMINATED.is_set():
            code, name = terminated_by()
            return code, f"terminated ({name}) (log: {log})"
        case Aborted():
            return EXIT_INTERRUPTED, f"interrupted: {reason_of(outcome)} (log: {log})"
        case _:
            return EXIT_ERROR, f"error: {reason_of(outcome)} (log: {log})"


def _result(
    session: Session, outcome: Outcome, answer: str | None, code: int, problem: str
) -> dict[str, Any]:
    end = _session_end(session)
    files: dict[str, None] = {}
    for change_set in events_of(session.recorder.records, ChangeSet):
        files.update((f["path"], None) for f in change_set.files)  # Change.as_json's
    return {
        "answer": answer,
        "status": status_of(outcome),
        "reason": reason_of(outcome),
        "exit_code": code,
        "error": problem or None,
        "tokens": end.tokens if end else None,
        "prompt_tokens": end.prompt_tokens if end else None,
        "completion_tokens": end.completion_tokens if end else None,
        "steps": end.steps if end else None,
        "elapsed_s": end.elapsed_s if end else None,
        "files_changed": list(files),
        "workers": workers_of(session.recorder.records),
        "log": str(session.log.path),
        "session_id": session.session_id,
    }


def workers_of(records: list[Record]) -> list[dict[str, Any]]:
    """Every worker the run started, in order: who started it, with which delegate call
    (workers of one fan-out share it: `call` numbers the delegate calls that started
    workers, from 1, in the order they ended), its task, and how it ended."""
    lines = lines_of(records)
    ends = {end.child_id: end for _, end in of_type(lines, DelegateEnd)}
    call_of: dict[str, int] = {}
    delegations = [
        c
        for _, c in of_type(lines, ToolCalled)
        if c.name == "delegate" and (c.facts or {}).get("worker")
    ]
    for number, called in enumerate(delegations, 1):
        for worker in str((called.facts or {}).get("worker") or "").split(","):
            call_of.setdefault(worker.strip(), number)
    return [
        {
            "id": start.child_id,
            "profile": start.child_profile,
            "parent": line.agent_id,
            "call": call_of.get(start.child_id),
            "task": start.task,
            "status": ends[start.child_id].status if start.child_id in ends else "running",
            "files_changed": ends[start.child_id].files_changed if start.child_id in ends else [],
        }
        for line, start in of_type(lines, DelegateStart)
    ]


def _summary(session: Session, outcome: Outcome) -> str:
    end = _session_end(session)
    steps, tokens, elapsed = (end.steps, end.tokens, end.elapsed_s) if end else (0, 0, 0.0)
    return (
        f"{status_of(outcome)} · {steps} step{'' if steps == 1 else 's'} · "
        f"{tokens:,} tokens · {elapsed:.1f} s · log: {session.log.path}"
    )


def _session_end(session: Session) -> SessionEnd | None:
    ends = events_of(session.recorder.records, SessionEnd)
    return ends[-1] if ends else None
