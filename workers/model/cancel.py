"""Ending a model call from another thread, so the server stops work nobody waits for.

A call blocks its thread in a socket read: for minutes while a local server reads a long
prompt. When the agent is cancelled (its caller's wall clock ran out, Ctrl-C), that
socket is shut down: the read ends at once, and the server sees its client leave and
frees the slot for the calls that still matter. The SDK's HTTP stack keeps its sockets
to itself, so its connection pool is given a network backend that notes which socket
each thread is reading from. Where that stack is not the one expected, nothing is
installed and a cancel waits for the call to end, as before.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

# How often a waiting call looks up to see whether it was cancelled.
POLL_S = 0.1
# The most one reply may send, streamed events and all: a long reply at gaffer's output
# caps is a few MB; a server that sends more (a 300 MB line) is cut before it fills memory.
MAX_REPLY_BYTES = 64 * 1024 * 1024


class ReplyTooLarge(Exception):
    """The server sent more than MAX_REPLY_BYTES for one reply."""


class Readers:
    """Which socket each thread is blocked reading from, right now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_thread: dict[int, socket.socket] = {}
        self._received: dict[int, int] = {}
        """Bytes read so far by the call each thread is making (`interruptible`)."""

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        """While the block runs, this thread's reads count towards MAX_REPLY_BYTES."""
        thread = threading.get_ident()
        self._received[thread] = 0
        try:
            yield
        finally:
            self._received.pop(thread, None)

    def received(self, thread: int) -> int:
        """Bytes the call `thread` is making has read so far (0 outside `interruptible`)."""
        return self._received.get(thread, 0)

    def count(self, size: int) -> None:
        """Note bytes read by this thread's call; ReplyTooLarge past MAX_REPLY_BYTES."""
        thread = threading.get_ident()
        if thread not in self._received:
            return
        self._received[thread] += size
        if self._received[thread] > MAX_REPLY_BYTES:
            raise ReplyTooLarge(
                f"the server sent more than {MAX_REPLY_BYTES // (1024 * 1024)} MB for one reply"
            )

    @contextlib.contextmanager
    def reading(self, sock: socket.socket | None) -> Iterator[None]:
        thread = threading.get_ident()
        if sock is not None:
            with self._lock:
                self._by_thread[thread] = sock
        try:
            yield
        finally:
            with self._lock:
                self._by_thread.pop(thread, None)

    def shut(self, thread: int) -> bool:
        with self._lock:
            sock = self._by_thread.get(thread)
        if sock is None:
            return False
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        return True


class _Stream:
    """A network stream that says which socket a read blocks on."""

    def __init__(self, inner: Any, sock: socket.socket | None, readers: Readers) -> None:
        self._inner, self._sock, self._readers = inner, sock, readers

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with self._readers.reading(self._sock):
            data = bytes(self._inner.read(max_bytes, timeout))
        self._readers.count(len(data))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        with self._readers.reading(self._sock):
            self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> _Stream:
        # TLS wraps the same TCP socket: shutting that down still ends the read.
        return _Stream(
            self._inner.start_tls(ssl_context, server_hostname, timeout), self._sock, self._readers
        )

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend:
    def __init__(self, inner: Any, readers: Readers) -> None:
        self._inner, self._readers = inner, readers

    def connect_tcp(self, *args: Any, **kwargs: Any) -> _Stream:
        stream = self._inner.connect_tcp(*args, **kwargs)
        return _Stream(stream, stream.get_extra_info("socket"), self._readers)

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> _Stream:
        stream = self._inner.connect_unix_socket(*args, **kwargs)
        return _Stream(stream, stream.get_extra_info("socket"), self._readers)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def install(openai_client: Any) -> Readers | None:
    """Track the sockets of this OpenAI client's connection pool; None where its HTTP stack
    is not the one this knows (then calls are not interrupted, only waited for)."""
    try:
        pool = openai_client._client._transport._pool
        backend = pool._network_backend
    except AttributeError:
        return None
    readers = Readers()
    pool._network_backend = _Backend(backend, readers)
    return readers


@contextlib.contextmanager
def interruptible(readers: Readers | None, cancelled: Callable[[], bool] | None) -> Iterator[None]:
    """While the block runs in this thread, a cancel shuts the socket it reads from."""
    if readers is None or cancelled is None:
        yield
        return
    caller, done = threading.get_ident(), threading.Event()

    def watch() -> None:
        # Until the block ends: a cancel between two reads is acted on at the next one.
        while not done.wait(POLL_S):
            if cancelled() and readers.shut(caller):
                return

    watcher = threading.Thread(target=watch, name="gaffer-cancel-watch", daemon=True)
    watcher.start()
    try:
        with readers.counting():
            yield
    finally:
        done.set()
