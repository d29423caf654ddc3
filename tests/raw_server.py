"""A tiny raw HTTP server on 127.0.0.1 for what a well-behaved one never sends (bodies
that break off, gzip, SSE blocks without data): each connection runs the next
handler(conn, head, body)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading


class Raw:
    def __init__(self, handlers):
        self.handlers = list(handlers)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.heads: list[bytes] = []
        self.conns = 0
        self.closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/v1"

    def _serve(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns += 1
            handler = self.handlers.pop(0) if len(self.handlers) > 1 else self.handlers[0]
            threading.Thread(target=self._one, args=(conn, handler), daemon=True).start()

    def _one(self, conn, handler):
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                piece = conn.recv(65536)
                if not piece:
                    return
                data += piece
            head, _, rest = data.partition(b"\r\n\r\n")
            self.heads.append(head)
            length = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            while len(rest) < length:
                piece = conn.recv(65536)
                if not piece:
                    break
                rest += piece
            handler(conn, head, rest)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def close(self):
        self.closed = True
        self.sock.close()


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def sse_head(extra=b""):
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        + extra
        + b"\r\n"
    )


def delta(text, finish=None):
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": text} if text is not None else {},
                    "finish_reason": finish,
                }
            ],
        }
    )


def good_stream(conn, head, body, text="hello"):
    conn.sendall(
        sse_head()
        + chunk(f"data: {delta(text)}\n\n".encode())
        + chunk(f"data: {delta(None, 'stop')}\n\n".encode())
        + chunk(b"data: [DONE]\n\n")
        + b"0\r\n\r\n"
    )


def chain(e):
    out, seen = [], set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        out.append(f"{type(e).__module__}.{type(e).__name__}: {e}")
        e = e.__cause__ or e.__context__
    return out


def all_chain(e):
    """Every exception reachable via __cause__ and __context__ (both)."""
    out, todo, seen = [], [e], set()
    while todo:
        x = todo.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        out.append(f"{type(x).__module__}.{type(x).__name__}: {x}")
        todo += [x.__cause__, x.__context__]
    return out
