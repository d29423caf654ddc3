"""Log lines per second from 16 threads, and a check that no line was torn."""

from __future__ import annotations

import json
import tempfile
import threading
import time
from pathlib import Path

from bench.common import Row, size
from workers.log.eventlog import JsonlLog
from workers.log.events import Emitter
from workers.log.schema import ToolCalled

THREADS = 16
LINES_PER_THREAD = 2000

# A tool_call line as the loop writes one (workers/calls.py), less its content.
TOOL_CALL = {
    "step": 1,
    "name": "read_file",
    "tool_call_id": "call_1",
    "args": {},
    "label": "",
    "is_error": False,
    "elapsed_s": 0.001,
    "summary": "40 lines",
    "result_preview": "",
    "result_chars": 0,
    "content": "",
    "sandbox": "host",
}


def run() -> list[Row]:
    threads_n, per_thread = size(THREADS, 2), size(LINES_PER_THREAD, 50)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.jsonl"
        log = JsonlLog(path)
        events = Emitter([log]).bind(session_id="bench")

        def write(n: int) -> None:
            agent = events.bind(agent_id=f"w{n}")
            for i in range(per_thread):
                agent.emit(ToolCalled(**{**TOOL_CALL, "args": {"path": f"src/m{i}.py"}}))

        threads = [threading.Thread(target=write, args=(n,)) for n in range(threads_n)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        log.close()
        torn = 0
        lines = path.read_text().splitlines()
        for line in lines:
            try:
                json.loads(line)
            except json.JSONDecodeError:
                torn += 1
    total = threads_n * per_thread
    return [
        Row(f"log lines/s from {threads_n} threads", round(total / elapsed), "lines/s"),
        Row(
            "torn or lost log lines",
            torn + (total - len(lines)),
            "lines",
            "= 0",
            torn == 0 and len(lines) == total,
        ),
    ]
