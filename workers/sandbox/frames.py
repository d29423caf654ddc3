"""Reading the tool server's replies off Docker's attach stream, one line at a time."""

from __future__ import annotations

import select
import socket
import struct
import time
from typing import Any

from workers.sandbox import SandboxFault

# Far past any honest reply (tool outputs are capped near 60 KB before JSON escaping):
# a longer line is a broken or hostile server, not a big answer.
MAX_REPLY_BYTES = 4 * 1024 * 1024


class FrameReader:
    """Lines of the container's stdout from Docker's multiplexed attach stream.

    Each frame is an 8-byte header (stream 1 = stdout, 2 = stderr; 4-byte length) and
    its payload. stderr is kept for error messages.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""
        self._stdout = b""
        self._stderr = b""
        self._closed = False

    def next_line(self, deadline: float, poll: Any) -> str | None:
        """The next stdout line; None when the stream ends or the deadline passes first;
        SandboxFault for a line longer than MAX_REPLY_BYTES."""
        while b"\n" not in self._stdout:
            if len(self._stdout) > MAX_REPLY_BYTES:
                raise SandboxFault(
                    f"the tool server sent a reply of more than {MAX_REPLY_BYTES // (1024 * 1024)} MB; "
                    "the worker is stopped"
                )
            if self._closed or time.monotonic() > deadline:
                return None
            poll()
            ready, _, _ = select.select([self._sock], [], [], 0.05)
            if not ready:
                continue
            chunk = self._sock.recv(65536)
            if not chunk:
                self._closed = True
                continue
            self._buffer += chunk
            self._split_frames()
        line, self._stdout = self._stdout.split(b"\n", 1)
        if len(line) > MAX_REPLY_BYTES:
            raise SandboxFault(
                f"the tool server sent a reply of more than {MAX_REPLY_BYTES // (1024 * 1024)} MB; "
                "the worker is stopped"
            )
        return line.decode("utf-8", errors="replace")

    def _split_frames(self) -> None:
        if len(self._buffer) > MAX_REPLY_BYTES + 8:
            raise SandboxFault("the tool server's output stream is broken; the worker is stopped")
        while len(self._buffer) >= 8:
            stream, length = self._buffer[0], struct.unpack(">I", self._buffer[4:8])[0]
            if len(self._buffer) < 8 + length:
                return
            payload, self._buffer = self._buffer[8 : 8 + length], self._buffer[8 + length :]
            if stream == 2:
                self._stderr = (self._stderr + payload)[-4000:]
            else:
                self._stdout += payload

    def stderr_tail(self) -> str:
        text = " ".join(self._stderr.decode("utf-8", errors="replace").split())
        return text if len(text) <= 500 else "…" + text[-500:]
