"""The host's side of the tool-server channel: only bounded, well-formed answers to the
request just sent are believed; anything else ends the worker with a clear error."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from workers.executor import execute
from workers.facts import TOOL_FACTS, BadFacts, Facts
from workers.limits import Budget
from workers.model import ToolCall
from workers.sandbox import SandboxFault
from workers.sandbox.docker import DockerSandbox
from workers.sandbox.frames import MAX_REPLY_BYTES, FrameReader
from workers.sandbox.guard import Survey
from workers.sandbox.host import HostSandbox
from workers.sandbox.tool_server import handle
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import ToolContext


def frame(payload: bytes, stream: int = 1) -> bytes:
    """One frame of Docker's multiplexed stream: 1 = stdout, 2 = stderr."""
    return bytes([stream, 0, 0, 0]) + struct.pack(">I", len(payload)) + payload


def sandbox() -> DockerSandbox:
    container = SimpleNamespace(short_id="c0ffee", id="c0ffee")
    return DockerSandbox(container, Survey((), (), {}, (), (), {}))


def test_a_reply_longer_than_the_cap_ends_the_worker_without_growing() -> None:
    ours, theirs = socket.socketpair()
    chunk = frame(b"x" * 65536)

    def flood() -> None:
        try:
            for _ in range(150 * 1024 * 1024 // 65536):  # 150 MB, no newline
                theirs.sendall(chunk)
        except OSError:
            pass  # the reader gave up and closed: as it should

    threading.Thread(target=flood, daemon=True).start()
    reader = FrameReader(ours)
    started = time.monotonic()
    with pytest.raises(SandboxFault, match="more than 4 MB"):
        reader.next_line(time.monotonic() + 60, lambda: False)
    assert len(reader._stdout) <= MAX_REPLY_BYTES + 2 * 65536
    ours.close()
    theirs.close()
    assert time.monotonic() - started < 30


def test_stdout_and_stderr_frames_are_kept_apart() -> None:
    ours, theirs = socket.socketpair()
    theirs.sendall(
        frame(b'{"id": 1, ') + frame(b"noise on stderr\n", 2) + frame(b'"output": "ok"}\n')
    )
    reader = FrameReader(ours)
    assert reader.next_line(time.monotonic() + 5, lambda: False) == '{"id": 1, "output": "ok"}'
    assert "noise on stderr" in reader.stderr_tail()


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("not json at all", "malformed reply"),
        ('{"id": 1, "output": 42}', "malformed reply"),
        ('{"id": 1, "output": "x", "extra": true}', "malformed reply"),
        ('{"output": "x"}', "malformed reply"),
        ('{"id": 7, "output": "forged", "facts": {"exit_code": 0}}', "answered request 7 while 1"),
    ],
)
def test_a_malformed_or_unasked_reply_ends_the_worker(line: str, why: str) -> None:
    with pytest.raises(SandboxFault, match=why):
        sandbox()._check(line, 1)


def test_a_good_reply_is_read_whole() -> None:
    reply = sandbox()._check(
        '{"id": 3, "output": "hi", "summary": "exit 0", "is_error": false, "facts": {"exit_code": 0}}',
        3,
    )
    assert (reply.output, reply.facts) == ("hi", {"exit_code": 0})


@pytest.mark.parametrize(
    "facts",
    [
        '{"exit_code": "0"}',
        '{"modified": "calc.py"}',
        '{"verified": true}',
        '{"evidence": [{"exit_code": 0.5}]}',
        '{"worker": "w9", "status": "completed", "evidence": []}',
        '{"container": "elsewhere"}',
    ],
)
def test_facts_gaffer_never_writes_end_the_worker(facts: str) -> None:
    """Facts cross the channel as JSON; anything not in their shape, or not a tool's to
    give, is not believed."""
    with pytest.raises(BadFacts):
        Facts.from_json(json.loads(facts), TOOL_FACTS)
    box = sandbox()
    reply = box._check(f'{{"id": 1, "output": "x", "facts": {facts}}}', 1)
    with pytest.raises(SandboxFault, match="sent facts gaffer never writes"):
        box._result(reply)


def test_facts_go_through_json_and_back_unchanged() -> None:
    worker = Facts(
        worker="w1",
        status="completed",
        modified=("a.py",),
        evidence=(Facts(modified=("a.py",)), Facts(command="pytest", exit_code=0, timed_out=False)),
    )
    assert Facts.from_json(json.loads(json.dumps(worker.as_json()))) == worker
    assert Facts(command="x", exit_code=None).as_json() == {"command": "x"}
    assert Facts(worker="w2").as_json() == {"worker": "w2", "evidence": []}


def test_a_call_that_goes_wrong_reads_the_same_in_the_container_and_on_the_host(
    tmp_path: Path,
) -> None:
    """The tool server and the host's executor share one set of words for failures."""
    host = HostSandbox(ToolContext(tmp_path))
    for name, arguments in [
        ("read_file", {"path": "missing.txt"}),  # the tool says why
        ("read_file", {"limit": "many"}),  # the arguments do not fit
    ]:
        in_container = handle(
            {"id": 1, "tool": name, "args": arguments}, tmp_path, threading.Event()
        )
        call = ToolCall(id="c", name=name, arguments="")
        on_host = execute(call, arguments, BUILTIN_TOOLS, host, Budget())
        assert in_container["is_error"] and on_host.is_error
        assert (in_container["output"], in_container["summary"]) == (
            on_host.output,
            on_host.summary,
        )


def test_the_image_hash_covers_every_module_the_tool_server_runs(tmp_path: Path) -> None:
    from workers.sandbox.image import _imported_by

    workers = tmp_path / "workers"
    files = {
        "__init__.py": "",
        "sandbox/__init__.py": "from workers.sandbox.errors import SandboxFault\n",
        "sandbox/errors.py": "class SandboxFault(Exception): ...\n",
        "sandbox/tool_server.py": "from workers.tools import base\n",
        "tools/__init__.py": "",
        "tools/base.py": "def late():\n    import workers.extra\n",
        "extra.py": "import json\n",
        "loop.py": "from workers.tools import base\n",  # imports the server's code, is not run by it
    }
    for name, text in files.items():
        (workers / name).parent.mkdir(parents=True, exist_ok=True)
        (workers / name).write_text(text)
    found = {
        p.relative_to(workers).as_posix()
        for p in _imported_by("workers.sandbox.tool_server", workers)
    }
    assert found == set(files) - {"loop.py"}
