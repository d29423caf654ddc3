"""The jsonl log: whole lines from many threads, flushed as written."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from workers.eventlog import JsonlLog
from workers.events import Emitter, Recorder


def test_many_threads_never_tear_a_line(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "run.jsonl")
    events = Emitter([log]).bind(session_id="s")
    payload = "x" * 5000  # longer than a pipe's atomic write, to give tearing a chance

    def writer(n: int) -> None:
        worker = events.bind(agent_id=f"w{n}")
        for i in range(200):
            worker.emit("tool_call", name="read_file", i=i, payload=payload)

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
    assert all(r["payload"] == payload for r in records)


def test_each_line_is_on_disk_when_emit_returns(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "run.jsonl")
    Emitter([log]).bind(session_id="s", agent_id="main").emit("session_start", task="t")
    line = json.loads((tmp_path / "run.jsonl").read_text())
    assert list(line)[:4] == ["ts", "event", "session_id", "agent_id"]
    assert line["ts"].endswith("+00:00")


def test_live_events_are_not_logged_and_unknown_events_are_refused(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "run.jsonl")
    recorder = Recorder(live=True)
    events = Emitter([log, recorder]).bind(session_id="s", agent_id="main")
    events.emit("text_delta", text="hello")
    assert (tmp_path / "run.jsonl").read_text() == ""
    assert recorder.of("text_delta")[0]["text"] == "hello"
    with pytest.raises(ValueError, match="unknown event"):
        events.emit("made_up")  # type: ignore[arg-type]


def test_values_json_cannot_encode_are_written_as_text(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "run.jsonl")
    Emitter([log]).bind(session_id="s", agent_id="main").emit("session_start", workspace=tmp_path)
    assert json.loads((tmp_path / "run.jsonl").read_text())["workspace"] == str(tmp_path)


def test_the_first_line_says_the_log_format_and_readers_check_it(tmp_path: Path) -> None:
    from supervisor import runlog
    from workers.events import LOG_FORMAT

    path = tmp_path / "run.jsonl"
    log = JsonlLog(path)
    events = Emitter([log]).bind(session_id="s", agent_id="main")
    events.emit("session_start", task="t")
    events.emit("turn_start", step=1)
    log.close()
    again = JsonlLog(path)  # appending to a log: its first line already says it
    Emitter([again]).bind(session_id="s", agent_id="main").emit("turn_start", step=2)
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
    statuses = {r.run_id: r.status for r in runlog.list_runs(tmp_path)}
    assert statuses == {"newer": "newer format", "older": "interrupted", "run": "interrupted"}
