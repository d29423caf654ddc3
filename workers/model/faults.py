"""What can go wrong talking to an endpoint, told apart: what is retried, how long a
server may ask to wait, what a wrong address looks like, and how each fault is said."""

from __future__ import annotations

import email.utils
import re
import socket
import ssl
import time
import urllib.parse

from tenacity import RetryCallState
from tenacity.stop import stop_base

from workers.model import Cancelled
from workers.model.http_errors import APIError, ConnectionFailed, StatusError, TimedOut
from workers.model.replies import IncompleteStream


class CallTooLong(Exception):
    """One request outlived its time (request_timeout, or what the run had left)."""


RETRYABLE_STATUS = frozenset({408, 409, 429})
# A server asking to wait longer than this (Retry-After) is not waited for: the call
# stops at once with the reason, as it does when the run has less time left than that.
MAX_RETRY_AFTER_S = 60.0
# One model call, every try and every wait together, past the longest a request may
# take: a server that drips a byte at a time, or fails slowly, is given up on here
# rather than after max_attempts full request timeouts (an hour at the defaults).
MAX_CALL_S = 900.0
# The server could not read the model's reply as its tool-call format (llama.cpp says
# so in a 500, or in an error event mid-stream). That is the model's mistake: retrying
# the same prompt repeats it.
UNREADABLE_OUTPUT = re.compile(
    r"parse tool call|tool call arguments|failed to parse.*tool"
    r"|model produced output that does not match",
    re.IGNORECASE,
)
CONTEXT_ERROR = re.compile(
    r"context[ _-]?(length|window|size)|maximum context|too many tokens|prompt is too long",
    re.IGNORECASE,
)


class stop_when(stop_base):
    """Stop retrying once this is true (the call was cancelled)."""

    def __init__(self, condition: Cancelled) -> None:
        self.condition = condition

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.condition()


class stop_if_asked_to_wait_too_long(stop_base):
    """Stop retrying when the server's Retry-After is longer than gaffer waits, or than
    the call has left."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        error = retry_state.outcome.exception() if retry_state.outcome else None
        return too_long_to_wait(error, self.deadline) is not None


def too_long_to_wait(error: BaseException | None, deadline: float | None) -> str | None:
    """Why the wait the server asks for is not waited, or None."""
    asked = retry_after(error)
    if asked is None:
        return None
    if asked > MAX_RETRY_AFTER_S:
        return f"more than gaffer waits ({MAX_RETRY_AFTER_S:.0f} s)"
    if deadline is not None and asked > deadline - time.monotonic():
        return f"more than the run has left ({max(0.0, deadline - time.monotonic()):.0f} s)"
    return None


def wrong_address(error: BaseException) -> bool:
    """A fault that, on a first call, means the address is wrong: nothing listens there,
    the host does not resolve, or what answers is not a Chat Completions server."""
    if isinstance(error, TimedOut):
        return False  # a slow server is still a server
    if isinstance(error, ConnectionFailed):
        # Never connected (refused, no such host), as opposed to a connection that broke.
        return not error.connected
    return isinstance(error, StatusError) and error.status_code in (405, 501)


def is_retryable(error: BaseException) -> bool:
    if isinstance(error, APIError) and UNREADABLE_OUTPUT.search(error.message):
        return False
    if isinstance(error, StatusError):
        return error.status_code in RETRYABLE_STATUS or error.status_code >= 500
    # ConnectionFailed covers timeouts and connections dropped mid-stream; a bare
    # APIError is an `error` event inside a stream, which servers send for transient faults.
    return isinstance(error, APIError | IncompleteStream | CallTooLong)


def retry_after(error: BaseException | None) -> float | None:
    if not isinstance(error, StatusError):
        return None
    headers = error.headers
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_code(error: StatusError) -> str | None:
    body = error.body
    if not isinstance(body, dict):
        return None
    inner = body.get("error")
    code = body.get("code") or (inner.get("code") if isinstance(inner, dict) else None)
    return code if isinstance(code, str) else None


def describe(error: BaseException | None) -> str:
    if error is None:
        return "unknown error"
    if isinstance(error, StatusError):
        return f"HTTP {error.status_code}: {short(error.message)}"
    cause = error.__cause__ or error.__context__
    detail = f" ({type(cause).__name__}: {short(str(cause))})" if cause else ""
    return f"{type(error).__name__}: {short(str(error))}{detail}"


def short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def caused_by(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    """`error`, or the first exception in its chain of causes, that is a `kind`."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def first_contact(
    error: BaseException, url: str, base_url: str | None, api_name: str, wire: str
) -> str:
    """What a wrong address looks like on a first call, in one line with a hint: a path
    that serves no such API, a host that does not resolve (or no network), a port where
    nothing listens."""
    hint = "" if url.rstrip("/").endswith("/v1") else f"; did you mean {url.rstrip('/')}/v1?"
    if isinstance(error, StatusError):
        return (
            f"{url} does not serve the {api_name} API (HTTP {error.status_code} on "
            f"{wire}){hint or '; is it an OpenAI-compatible server?'}"
        )
    parts = urllib.parse.urlsplit(base_url or url)
    host = parts.hostname or url
    if isinstance(unresolved := caused_by(error, socket.gaierror), socket.gaierror):
        if unresolved.errno == socket.EAI_AGAIN:
            return f"cannot resolve {host}: no network, or no DNS server answers (offline?)"
        return f"{host} does not resolve: is the address in {url} right?"
    if caused_by(error, ConnectionRefusedError) is not None:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return (
            f"nothing is listening at {host}:{port} (connection refused): "
            f"is the server running, and is {url} its address?"
        )
    tls = caused_by(error, ssl.SSLError)
    if isinstance(tls, ssl.SSLError) and tls.reason in PLAIN_HTTP_REPLIES:
        return (
            f"{host}:{parts.port or 443} answered in plain HTTP, not TLS: if it is a local "
            f"server, use http://{url.removeprefix('https://')} as the base URL"
        )
    cause = f"{error.__cause__ or error}"
    return f"cannot connect to {url}: is the server running? ({short(cause, 120)})"


# What OpenSSL says when an https:// URL reaches a server that answers in plain HTTP.
PLAIN_HTTP_REPLIES = frozenset(
    {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST"}
)
