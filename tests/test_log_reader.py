"""The one typed reader of run logs (workers/log/reader.py): the dataclasses the writer
wrote come back equal, older lines read with their missing keys filled in, and what
cannot be read is left out or refused, never half-understood."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from workers.log.eventlog import JsonlLog
from workers.log.events import LOG_FORMAT, Emitter
from workers.log.reader import RunUnreadable, line_of, of_type, read_lines
from workers.log.schema import AgentStart, LlmCall, SessionStart, TextDelta, ToolCalled


def test_what_the_writer_wrote_reads_back_as_the_same_dataclasses(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "run.jsonl")
    events = Emitter([log]).bind(session_id="s1")
    start = SessionStart("task", "/w", "m", None, "1", 7, "supervisor", 10, None, None, None)
    worker = events.bind(agent_id="w1", parent_id="supervisor", profile="coder", node="n2")
    call = ToolCalled(
        step=1, name="read_file", tool_call_id="c1", args={"path": "a.py"}, label="a.py",
        is_error=False, elapsed_s=0.1, summary="read", result_preview="x", result_chars=1,
        content="x", sandbox="docker", facts={"modified": ["a.py"]},
    )  # fmt: skip
    events.bind(agent_id="supervisor").emit(start)
    worker.emit(TextDelta(text="live only", step=1))
    worker.emit(call)
    log.close()

    lines = read_lines(tmp_path / "run.jsonl")

    assert [line.event for line in lines] == [start, call], "live events are never written"
    first, second = lines
    assert (first.agent_id, first.session_id, first.parent_id) == ("supervisor", "s1", None)
    assert (second.agent_id, second.parent_id, second.profile, second.node) == (
        "w1",
        "supervisor",
        "coder",
        "n2",
    )
    assert 0 < first.ts <= second.ts
    assert [event.name for _, event in of_type(lines, ToolCalled)] == ["read_file"]


def test_an_older_lines_missing_keys_take_defaults_or_empty_values() -> None:
    # format 1: no snapshot, no tools list; an llm_call without calls, aside or reasoning
    start = line_of({"event": "agent_start", "agent_id": "w1", "model": "m", "sandbox": "host"})
    call = line_of({"event": "llm_call", "ts": "2026-11-01T10:00:00.000+00:00", "text": "hi"})

    assert start is not None and isinstance(start.event, AgentStart)
    assert start.event.tools == [] and start.event.snapshot is None
    assert start.event.max_steps == 0 and start.event.max_seconds is None
    assert call is not None and isinstance(call.event, LlmCall)
    assert call.event.calls == [] and call.event.aside is None and call.event.text == "hi"
    assert call.ts == datetime(2026, 11, 1, 10, tzinfo=UTC).timestamp()
    assert call.event.calls is not (line_of({"event": "llm_call"}).event.calls), "not shared"  # type: ignore[union-attr]


def test_unknown_events_and_torn_lines_are_left_out_and_newer_logs_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text(
        json.dumps({"event": "user_message", "log_format": LOG_FORMAT, "content": "go"})
        + "\n"
        + json.dumps({"event": "from_the_future", "x": 1})
        + '\n{"event": "llm_call", "te'
    )
    assert [type(line.event).__name__ for line in read_lines(path)] == ["UserMessage"]

    path.write_text(json.dumps({"event": "session_start", "log_format": LOG_FORMAT + 1}) + "\n")
    with pytest.raises(RunUnreadable, match="written by a newer gaffer"):
        read_lines(path)
    path.write_text(json.dumps({"event": "session_start", "log_format": "x"}) + "\n")
    with pytest.raises(RunUnreadable, match="not a run log"):
        read_lines(path)


HOSTILE = [
    {"event": "session_start", "log_format": 1, "ts": 1e300, "task": ["not", "text"]},
    {"event": "user_message", "agent_id": "supervisor", "ts": int("9" * 400), "content": "go"},
    {"event": "llm_call", "agent_id": "supervisor", "calls": None, "elapsed_s": None},
    {"event": "llm_call", "agent_id": "supervisor", "calls": [{"id": "c1"}, 5], "text": 3},
    {"event": "tool_call", "agent_id": "supervisor", "tool_call_id": {}, "name": None},
    {"event": "tool_call", "agent_id": "w1", "name": "delegate", "content": None},
    {"event": "delegate_start", "agent_id": "supervisor", "child_id": [1], "task": None},
    {"event": "delegate_end", "agent_id": "supervisor", "files_changed": None, "tokens": "x"},
    {"event": "compaction", "agent_id": "supervisor", "messages_folded": "2", "state": 1},
    {"event": "agent_start", "agent_id": "w1", "parent_id": "supervisor", "tools": [1, 2]},
    {"event": "agent_end", "agent_id": "w1", "answer": 5, "status": None},
    {"event": "session_end", "ts": "not a time", "status": 7, "elapsed_s": "long"},
]


def test_a_planted_log_of_wrongly_typed_values_reads_without_tripping_any_reader(
    tmp_path: Path,
) -> None:
    """A repository can ship a log: every value of the wrong type reads as if it were
    missing, and each reader shows what is left."""
    from supervisor.resume import rebuild
    from supervisor.run_stats import stats
    from supervisor.runlog import list_runs, render
    from supervisor.timeline import build

    (tmp_path / "planted.jsonl").write_text("".join(json.dumps(r) + "\n" for r in HOSTILE))
    records = [json.loads(json.dumps(r)) for r in HOSTILE]

    rebuilt = rebuild(records)
    assert {"role": "user", "content": "go"} in rebuilt.messages
    assert all("tool_calls" not in m for m in rebuilt.messages), "no call says all it must"
    assert render(records) and stats(records)
    with pytest.raises(ValueError, match="no lines"):
        build(records)  # not one line has a time a clock can show
    [listed] = list_runs(tmp_path)
    assert (listed.started, listed.task, listed.status) == ("?", "", "")
    start = line_of(HOSTILE[0])
    assert start is not None and start.ts == 0.0 and start.event.task == ""  # type: ignore[attr-defined]


def test_the_last_run_is_the_one_started_last_even_within_one_second(tmp_path: Path) -> None:
    """Run ids name the second and end in random letters: two runs of one second sort by
    those letters, and `last` must not take the earlier one."""
    from supervisor.runlog import find_run

    for stem, ts in [
        ("20261203-101500-ffffff", "2026-12-03T10:15:00.100+00:00"),
        ("20261203-101500-000000", "2026-12-03T10:15:00.900+00:00"),
        ("20261203-101459-zzzzzz", "2026-12-03T10:14:59.999+00:00"),
    ]:
        (tmp_path / f"{stem}.jsonl").write_text(json.dumps({"ts": ts, "event": "x"}) + "\n")
    assert find_run(tmp_path, "last").stem == "20261203-101500-000000"
    (tmp_path / "20261203-101500-000000.jsonl").write_text("not json\n")
    assert find_run(tmp_path, "last").stem == "20261203-101500-ffffff", "unreadable: oldest"
