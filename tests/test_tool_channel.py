"""The host's side of the tool-server channel: only bounded, well-formed answers to the
request just sent are believed; anything else ends the worker with a clear error."""

from __future__ import annotations

import socket
import struct
import threading
import time
from types import SimpleNamespace

import pytest

from workers.sandbox import SandboxFault
from workers.sandbox.docker import DockerSandbox
from workers.sandbox.frames import MAX_REPLY_BYTES, FrameReader
from workers.sandbox.guard import Survey


def frame(payload: bytes, stream: int = 1) -> bytes:
    """One frame of Docker's multiplexed stream: 1 = stdout, 2 = stderr."""
    return bytes([stream, 0, 0, 0]) + struct.pack(">I", len(payload)) + payload


def sandbox() -> DockerSandbox:
    container = SimpleNamespace(short_id="c0ffee", id="c0ffee")
    return DockerSandbox(container, Survey((), (), {}, (), ()))


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
