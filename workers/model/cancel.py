"""Ending a model call from another thread, so the server stops work nobody waits for.

A call blocks its thread in a socket read: for minutes while a local server reads a long
prompt. When the agent is cancelled (its caller's wall clock ran out, Ctrl-C), that
socket is shut down: the read ends at once, and the server sees its client leave and
frees the slot for the calls that still matter. The sockets under the SDK
(workers/model/sockets.py) register here as their thread reads or writes them.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Protocol

# How often a waiting call looks up to see whether it was cancelled.
POLL_S = 0.1
# The most one reply may send, streamed events and all: a long reply at gaffer's output
# caps is a few MB; a server that sends more (a 300 MB line) is cut before it fills memory.
MAX_REPLY_BYTES = 64 * 1024 * 1024


class Shuttable(Protocol):
    """What a thread reads from: a socket, or a stream over one."""

    def shutdown(self, how: int, /) -> None: ...


class ReplyTooLarge(Exception):
    """The server sent more than MAX_REPLY_BYTES for one reply."""


class Readers:
    """Which socket each thread is blocked reading from, right now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_thread: dict[int, Shuttable] = {}
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

    def attach(self, stream: Shuttable) -> None:
        """This thread now reads or writes `stream`: a cancel shuts it."""
        with self._lock:
            self._by_thread[threading.get_ident()] = stream

    def detach(self, stream: Shuttable | None = None) -> None:
        """This thread no longer reads `stream` (whatever it read, when None)."""
        thread = threading.get_ident()
        with self._lock:
            if stream is None or self._by_thread.get(thread) is stream:
                self._by_thread.pop(thread, None)

    def shut(self, thread: int) -> bool:
        with self._lock:
            sock = self._by_thread.get(thread)
        if sock is None:
            return False
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        return True


@contextlib.contextmanager
def interruptible(readers: Readers, cancelled: Callable[[], bool] | None) -> Iterator[None]:
    """While the block runs in this thread, a cancel shuts the socket it reads from."""
    if cancelled is None:
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
