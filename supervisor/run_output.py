"""What `gaffer run` leaves on stdout and stderr when it ends, for a person or a script.

`--output-format text` (the default): the answer alone on stdout. `json`: one object
at the end (answer, status, reason, exit code, tokens, files changed, log path).
`stream-json`: every logged event as one JSON line as it happens (without whole file
contents), then that same object as a `result` line. These are the habits of
`claude -p --output-format`, `codex exec --json` and pi's json mode. Every run ends with
one summary line on stderr unless `--quiet`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Literal, NoReturn

from supervisor.costs import USAGE_KEYS, cost_of, dollars, run_cost, usage_of
from supervisor.exits import (
    EXIT_ERROR,
    EXIT_OK,
)
from supervisor.run_check import check_json
from supervisor.run_end import RunEnd, decide
from supervisor.session import Session
from supervisor.settings import Price
from supervisor.terminal import echo
from workers.log.events import LOGGED_EVENTS, Record
from workers.log.reader import events_of, lines_of, of_type
from workers.log.schema import (
    ChangeSet,
    DelegateEnd,
    DelegateStart,
    LlmCall,
    SessionEnd,
    ToolCalled,
    Verification,
)
from workers.outcome import Aborted, Failed, LimitHit, Outcome, reason_of, status_of

OutputFormat = Literal["text", "json", "stream-json"]
FORMATS = ("text", "json", "stream-json")
TOP_AGENT = "supervisor"
"""The agent id of the agent the user talks to, whatever its profile."""
# What holds whole files or a conversation's state: the log has it, a stream does not.
_HEAVY = {"tool_call": ("content",), "compaction": ("state",)}
# A file's text in a call's arguments: in a stream, its digest ({"chars", "sha256"}).
_HEAVY_ARGS = ("content", "old_text", "new_text")
# Every logged event, the model's text as it arrives, and each tool call as it starts.
STREAMED = LOGGED_EVENTS | {"text_delta", "tool_start"}


class JsonLines:
    """A subscriber printing each logged event on stdout as one JSON line; a reader that
    goes away (`| head -1`) ends the stream, never the run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gone = False

    def __call__(self, record: Record) -> None:
        if record["event"] not in STREAMED or self._gone:
            return
        shown = {"type": record["event"]}  # the discriminator other agents' streams use
        shown.update((k, v) for k, v in record.items() if k not in _HEAVY.get(record["event"], ()))
        if isinstance(args := shown.get("args"), dict):
            shown["args"] = {k: _digest(v) if k in _HEAVY_ARGS else v for k, v in args.items()}
        # ASCII escapes: a file name that is not UTF-8 cannot break the stream.
        line = json.dumps(shown, default=str)
        with self._lock:
            try:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
            except OSError:
                self._gone = True


def _digest(text: object) -> object:
    """A file's text in a stream: how long, and its SHA-256 (the log has it whole)."""
    if not isinstance(text, str):
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
    return {"chars": len(text), "sha256": digest}


def finish(
    session: Session,
    outcome: Outcome,
    output: OutputFormat,
    quiet: bool,
    shown: str = "",
    *,
    require_verified: bool = False,
    prices: Mapping[str, Price] | None = None,
) -> NoReturn:
    """Print what the run came to, in the asked format, and exit with its code. `shown`:
    the answer as the terminal view already streamed it to stderr."""
    end = run_end_of(session, outcome, require_verified)
    code, problem = end.exit_code, end.said(session.log.path)
    answer = getattr(outcome, "answer", None) or None
    printable = answer is not None and not isinstance(outcome, Aborted | Failed)
    if output == "text":
        if printable and (rest := _not_yet_shown(str(answer), shown)):
            echo(rest)
    else:
        result = _result(session, outcome, answer, code, problem, prices or {})
        if output == "stream-json":
            result = {"event": "result", **result}
        echo(json.dumps(result, default=str))
    if problem:
        echo(f"gaffer: {problem}", err=True)
    if not quiet:
        echo(f"gaffer: {_summary(session, outcome, prices or {})}", err=True)
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


def _result(
    session: Session,
    outcome: Outcome,
    answer: str | None,
    code: int,
    problem: str,
    prices: Mapping[str, Price],
) -> dict[str, Any]:
    """The run's result object: first under the names Claude Code's result uses (so a
    script written for `claude -p --output-format json` reads it), then gaffer's own."""
    records = session.recorder.records
    end = _session_end(session)
    files: dict[str, None] = {}
    for change_set in events_of(records, ChangeSet):
        files.update((f["path"], None) for f in change_set.files)  # Change.as_json's
    by_model = usage_of(call for _, call in of_type(lines_of(records), LlmCall))
    return {
        "type": "result",
        "subtype": _subtype(outcome, code),
        "is_error": code != EXIT_OK,
        "result": _alone(session, answer) or "",
        "session_id": session.session_id,
        "num_turns": end.llm_calls if end else 0,
        "duration_ms": round(end.elapsed_s * 1000) if end else 0,
        "duration_api_ms": round(sum(c.elapsed_s for c in events_of(records, LlmCall)) * 1000),
        "usage": _summed(by_model.values()),
        "modelUsage": by_model,
        "total_cost_usd": cost_of(by_model, prices),
        "permission_denials": denials(records),
        "verification": _verdict(records),
        "verified": None if session.check is None else session.check.verdict == "verified",
        "check": None if session.check is None else check_json(session.check),
        "answer": answer,
        "status": end.status if end else status_of(outcome),
        "reason": end.reason if end else reason_of(outcome),
        "exit_code": code,
        "error": problem or None,
        "error_kind": _error_kind(outcome, code),
        "tokens": end.tokens if end else None,
        "prompt_tokens": end.prompt_tokens if end else None,
        "completion_tokens": end.completion_tokens if end else None,
        "steps": end.steps if end else None,
        "elapsed_s": end.elapsed_s if end else None,
        "files_changed": list(files),
        "model_usage": by_model,  # modelUsage's old name, for one release
        "workers": workers_of(session.recorder.records),
        "log": str(session.log.path),
    }


def _alone(session: Session, answer: str | None) -> str | None:
    """The answer without gaffer's verdict beside it: a script reads the verdict from its
    own fields (`verified`, `check`, `verification`)."""
    if answer is None or not isinstance(session.answer_alone, str):
        return answer
    return session.answer_alone


def _error_kind(outcome: Outcome, code: int) -> str | None:
    """Why a run failed, for a script: auth, connection, rate_limited, not_found,
    bad_request, context_window, malformed_output, sandbox, internal; None when it did
    not fail (a limit, a shortfall or an interruption has its own status)."""
    if code != EXIT_ERROR or not isinstance(outcome, Failed):
        return None
    return {"unavailable": "connection"}.get(outcome.kind, outcome.kind)


def _subtype(outcome: Outcome, code: int) -> str:
    """Claude Code's result subtypes: a steps limit is its turns limit; anything else
    that is not exit 0 is an error during execution."""
    if code == EXIT_OK:
        return "success"
    if isinstance(outcome, LimitHit) and outcome.limit == "steps":
        return "error_max_turns"
    return "error_during_execution"


def _summed(usages: Iterable[dict[str, int]]) -> dict[str, int]:
    total = dict.fromkeys(USAGE_KEYS, 0)
    for used in usages:
        for key in USAGE_KEYS:
            total[key] += used[key]
    total.pop("calls")
    return total


def denials(records: list[Record]) -> list[dict[str, Any]]:
    """Each command the run's policy or its user refused: who asked, and for what."""
    return [
        {
            "agent": line.agent_id,
            "tool_name": called.name,
            "tool_use_id": called.tool_call_id,
            "tool_input": called.args,
        }
        for line, called in of_type(lines_of(records), ToolCalled)
        if (called.facts or {}).get("denied")
    ]


def _verdict(records: list[Record]) -> str | None:
    """The top agent's last accepted verdict: verified, unverified, or none (no change)."""
    accepted = [
        check.verdict
        for line, check in of_type(lines_of(records), Verification)
        if check.action == "accepted" and line.agent_id == TOP_AGENT
    ]
    return accepted[-1] if accepted else None


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


def _summary(session: Session, outcome: Outcome, prices: Mapping[str, Price]) -> str:
    end = _session_end(session)
    steps, tokens, elapsed = (end.steps, end.tokens, end.elapsed_s) if end else (0, 0, 0.0)
    said: str = end.status if end else status_of(outcome)
    if (check := session.check) is not None:  # a failed check is never "completed"
        failed = check.verdict in ("failed", "timed_out")
        said = f"check {check.line()}" if failed else f"{said} · {check.line()}"
    return (
        f"{said} · {steps} step{'' if steps == 1 else 's'} · "
        f"{tokens:,} tokens · {dollars(run_cost(session.recorder.records, prices))} · "
        f"{elapsed:.1f} s · log: {session.log.path}"
    )


def run_end_of(session: Session, outcome: Outcome, require_verified: bool) -> RunEnd:
    """The run's end as its log's last line says it (decided once, when the session
    ended); decided here only for a session that wrote none."""
    end = _session_end(session)
    if end is not None and end.exit_code is not None:
        return RunEnd(end.status, end.exit_code, end.reason)
    return decide(
        outcome,
        session.recorder.records,
        require_verified=require_verified,
        log_failure=session.log.failure,
    )


def _session_end(session: Session) -> SessionEnd | None:
    ends = events_of(session.recorder.records, SessionEnd)
    return ends[-1] if ends else None
