"""The jsonl log: whole lines from many threads, flushed as written."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import pytest

from workers.log.eventlog import JsonlLog
from workers.log.events import LIVE_EVENTS, LOGGED_EVENTS, Emitter, Recorder
from workers.log.schema import EVENTS, AgentEnd, TextDelta, TurnStart, UserMessage


def test_many_threads_never_tear_a_line(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "run.jsonl")
    events = Emitter([log]).bind(session_id="s")
    payload = "x" * 5000  # longer than a pipe's atomic write, to give tearing a chance

    def writer(n: int) -> None:
        worker = events.bind(agent_id=f"w{n}")
        for i in range(200):
            worker.emit(UserMessage(content=payload, source=str(i)))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log.close()
    lines = (tmp_path / "run.jsonl").read_text().splitlines()
    assert len(lines) == 16 * 200
    records = [json.loads(line) for line in lines]
    assert {r["agent_id"] for r in records} == {f"w{n}" for n in range(16)}
    assert all(r["content"] == payload for r in records)


def test_each_line_is_on_disk_when_emit_returns(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "run.jsonl")
    Emitter([log]).bind(session_id="s", agent_id="main").emit(TurnStart(step=1))
    line = json.loads((tmp_path / "run.jsonl").read_text())
    assert list(line)[:4] == ["ts", "event", "session_id", "agent_id"]
    assert line["ts"].endswith("+00:00")


def test_live_events_are_not_logged(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "run.jsonl")
    recorder = Recorder(live=True)
    events = Emitter([log, recorder]).bind(session_id="s", agent_id="main")
    events.emit(TextDelta(text="hello", step=1))
    assert (tmp_path / "run.jsonl").read_text() == ""
    assert recorder.of("text_delta")[0]["text"] == "hello"


def test_an_event_is_a_frozen_record_of_its_own_keys() -> None:
    """Keys that may be absent are left out when None; every other key is always
    written, None included, so a reader can tell "no limit" from "not said"."""
    end = AgentEnd(status="completed", reason="", steps=1, tokens=2, tool_calls=0, answer=None)
    assert end.fields() == {
        "status": "completed",
        "reason": "",
        "steps": 1,
        "tokens": 2,
        "tool_calls": 0,
        "answer": None,
    }
    crashed = dataclasses.replace(end, traceback="Traceback ...")
    assert crashed.fields()["traceback"] == "Traceback ..."
    with pytest.raises(dataclasses.FrozenInstanceError):
        end.steps = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        UserMessage(content="hi")  # type: ignore[call-arg]
    assert set(EVENTS) == LOGGED_EVENTS | LIVE_EVENTS and not LOGGED_EVENTS & LIVE_EVENTS
    for name, event in EVENTS.items():
        assert event.event == name and dataclasses.is_dataclass(event)


def test_values_json_cannot_encode_are_written_as_text(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "run.jsonl")
    events = Emitter([log]).bind(session_id="s", agent_id="main")
    events.emit(UserMessage(content=tmp_path, source="user"))  # type: ignore[arg-type]
    assert json.loads((tmp_path / "run.jsonl").read_text())["content"] == str(tmp_path)


def test_the_first_line_says_the_log_format_and_readers_check_it(tmp_path: Path) -> None:
    from supervisor import runlog
    from workers.log.events import LOG_FORMAT

    path = tmp_path / "run.jsonl"
    log = JsonlLog(path)
    events = Emitter([log]).bind(session_id="s", agent_id="main")
    events.emit(UserMessage(content="t", source="user"))
    events.emit(TurnStart(step=1))
    log.close()
    again = JsonlLog(path)  # appending to a log: its first line already says it
    Emitter([again]).bind(session_id="s", agent_id="main").emit(TurnStart(step=2))
    again.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line.get("log_format") for line in lines] == [LOG_FORMAT, None, None]
    assert len(runlog.read_records(path)) == 3

    older = tmp_path / "older.jsonl"  # format 1 had no key: read as it is
    older.write_text(json.dumps({"event": "session_start", "agent_id": "supervisor"}) + "\n")
    assert runlog.read_records(older)[0]["event"] == "session_start"

    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"event": "session_start", "log_format": LOG_FORMAT + 1}) + "\n")
    with pytest.raises(
        runlog.RunUnreadable, match=f"log format {LOG_FORMAT + 1}, written by a newer"
    ):
        runlog.read_records(newer)
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text(json.dumps({"event": "session_start", "log_format": "two"}) + "\n")
    with pytest.raises(runlog.RunUnreadable, match="says its log format is 'two': not a run log"):
        runlog.read_records(corrupt)
    corrupt.unlink()
    statuses = {r.run_id: r.status for r in runlog.list_runs(tmp_path)}
    assert statuses == {"newer": "newer format", "older": "interrupted", "run": "interrupted"}


def test_the_log_schema_and_its_documentation_agree() -> None:
    """Every key an event may carry is in its row of logs/README.md (or in the table of
    keys every line has), and every logged event has a row."""
    import re

    readme = (Path(__file__).parent.parent / "logs" / "README.md").read_text()
    common = set(re.findall(r"^\| `([a-z_]+)`", readme.split("## Events")[0], re.MULTILINE))
    rows = {
        m.group(1): m.group(0) for m in re.finditer(r"^\| `([a-z_]+)` \|.*$", readme, re.MULTILINE)
    }
    undocumented = {}
    for event in LOGGED_EVENTS:
        assert event in rows, f"{event} has no row in logs/README.md"
        documented = set(re.findall(r"`([a-z_]+)`", rows[event])) | common
        required, optional = EVENTS[event].keys()
        if missing := sorted((required | optional) - documented):
            undocumented[event] = missing
    assert undocumented == {}
