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
