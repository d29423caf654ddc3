"""HTTP to an OpenAI-compatible endpoint: one POST of JSON, its reply read as server-sent
events or as one JSON object, over the standard library's http.client.

Not the `openai` SDK: importing it costs about 0.4 s (it builds every type of every API
it knows), more than a whole trivial run. What gaffer relied on it for is here: the key
as a bearer token, proxies from the environment (`HTTPS_PROXY`, `NO_PROXY`), an error
per status with the server's own message, and the socket registered with `Readers`
(workers/model/cancel.py), so another thread can shut it and every byte read counts
against one reply's cap.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import io
import json
import os
import socket
import urllib.parse
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from workers.model.cancel import Readers
from workers.model.masking import Mask
from workers.model.replies import IncompleteStream

OPENAI_URL = "https://api.openai.com/v1"
# A server that has not taken the connection by then is down or unreachable; a slow
# model is slow later, in the reply, which request_timeout covers.
CONNECT_TIMEOUT_S = 15.0
# An error reply is read this far for its message; the rest is not needed.
MAX_ERROR_BYTES = 1 << 20
# A server's message is kept this long: enough for any real one, not a page of HTML.
MAX_MESSAGE_CHARS = 1000
# One read of a streamed line; a longer line is read in pieces.
READ_PIECE = 64 * 1024


class APIError(Exception):
    """The endpoint said no, or an error came inside a stream."""

    def __init__(self, message: str, body: object = None) -> None:
        super().__init__(message)
        self.message = message
        self.body = body


class StatusError(APIError):
    """An HTTP status of 300 or more, with the server's message."""

    def __init__(
        self, status_code: int, message: str, headers: dict[str, str], body: object
    ) -> None:
        super().__init__(f"Error code: {status_code} - {message}", body)
        self.status_code = status_code
        self.headers = headers
        """Lower-cased names (`retry-after`)."""


class ConnectionFailed(APIError):
    """No answer: never connected (`connected` False), or the connection broke."""

    def __init__(self, message: str, *, connected: bool) -> None:
        super().__init__(message)
        self.connected = connected


class TimedOut(ConnectionFailed):
    """Nothing came within the socket's timeout."""


class Endpoint:
    """One base URL and its key; a connection per request."""

    def __init__(self, base_url: str | None, api_key: str, readers: Readers) -> None:
        self.url = urllib.parse.urlsplit(base_url or OPENAI_URL)
        if self.url.scheme not in ("http", "https") or not self.url.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.readers = readers
        self.headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Accept-Encoding": "identity",
            "User-Agent": "gaffer",
        }
        # As the SDK does: an organisation and a project from the environment, when set.
        for header, variable in (
            ("OpenAI-Organization", "OPENAI_ORG_ID"),
            ("OpenAI-Project", "OPENAI_PROJECT_ID"),
        ):
            if value := os.environ.get(variable):
                self.headers[header] = value
        userinfo = self.url.netloc.rpartition("@")[0]
        query = [value for _, value in urllib.parse.parse_qsl(self.url.query)]
        self.mask = Mask([api_key, userinfo, self.url.password, *query])
        """What was sent that is secret, taken out of any text a server sends back."""

    def post(self, path: str, body: dict[str, Any], *, timeout: float) -> Reply:
        """POST `body` as JSON to `path` under the base URL; StatusError at 300 and up."""
        return self._request("POST", path, json.dumps(body).encode(), timeout)

    def get(self, path: str, *, timeout: float) -> Reply:
        return self._request("GET", path, None, timeout)

    def _request(self, method: str, path: str, data: bytes | None, timeout: float) -> Reply:
        target = self.url.path.rstrip("/") + path + (f"?{self.url.query}" if self.url.query else "")
        connection, target, headers = self._connection(target)
        reply = Reply(connection, self.readers, self.mask)
        try:
            try:
                connection.timeout = min(timeout, CONNECT_TIMEOUT_S)
                connection.connect()
            except (TimeoutError, OSError) as error:
                raise _failed(error, connected=False) from error
            if connection.sock is not None:  # from here, the request's own timeout per read
                connection.sock.settimeout(timeout)
            reply.start()
            try:
                connection.request(method, target, body=data, headers=headers)
                response = connection.getresponse()
            except (TimeoutError, OSError, http.client.HTTPException) as error:
                raise _failed(error, connected=True) from error
            reply.response = response
            if response.status >= 300:  # a redirect is not followed: the URL is to be mended
                raise reply.status_error()
        except BaseException:
            reply.close()
            raise
        return reply

    def _connection(self, target: str) -> tuple[http.client.HTTPConnection, str, dict[str, str]]:
        """A connection to the host, or to the proxy the environment names for it; the
        request target and headers to send on it."""
        host, https = self.url.hostname or "", self.url.scheme == "https"
        port = self.url.port or (443 if https else 80)
        proxy = _proxy_for(self.url.scheme, host, port)
        headers = dict(self.headers)
        connection: http.client.HTTPConnection
        if https:
            where = (proxy.hostname or "", proxy.port or 80) if proxy else (host, port)
            connection = http.client.HTTPSConnection(*where, context=_tls_context())
            if proxy:
                connection.set_tunnel(host, port, headers=_proxy_auth(proxy))
        elif proxy:  # a plain-HTTP proxy takes the whole URL as the target
            connection = http.client.HTTPConnection(proxy.hostname or "", proxy.port or 80)
            headers.update(_proxy_auth(proxy))
            target = f"http://{self.url.netloc.rsplit('@', 1)[-1]}{target}"
        else:
            connection = http.client.HTTPConnection(host, port)
        connection.response_class = _counted(self.readers)
        return connection, target, headers


class Reply:
    """A response being read: its lines, its server-sent events or its JSON. Its socket
    is registered with the readers from the request's sending until `close`."""

    def __init__(
        self, connection: http.client.HTTPConnection, readers: Readers, mask: Mask
    ) -> None:
        self.connection = connection
        self.readers = readers
        self.mask = mask
        self.response: http.client.HTTPResponse | None = None
        self._registered = contextlib.ExitStack()

    def start(self) -> None:
        self._registered.enter_context(self.readers.reading(self.connection.sock))

    def __enter__(self) -> Reply:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._registered.close()
        with contextlib.suppress(Exception):
            if self.response is not None:
                self.response.close()  # its reader holds the socket open until then
            self.connection.close()

    def lines(self) -> Iterator[str]:
        """The body's lines as they come, without their line ends."""
        assert self.response is not None
        pieces: list[bytes] = []
        while True:
            try:
                piece = self.response.readline(READ_PIECE)
            except (TimeoutError, OSError, http.client.HTTPException) as error:
                raise _failed(error, connected=True) from error
            if not piece:
                if pieces:
                    yield b"".join(pieces).decode("utf-8", "replace")
                return
            pieces.append(piece)
            if piece.endswith(b"\n"):
                yield b"".join(pieces).decode("utf-8", "replace").rstrip("\r\n")
                pieces = []

    def events(self) -> Iterator[str]:
        """Each server-sent event's data, until `[DONE]` or the end of the body."""
        data: list[str] = []
        for line in self.lines():
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line and data:
                if (event := "\n".join(data)) == "[DONE]":
                    return
                yield event
                data = []
        if data and (event := "\n".join(data)) != "[DONE]":
            yield event

    def read(self, limit: int | None = None) -> bytes:
        """The whole body (at most `limit` bytes)."""
        assert self.response is not None
        chunks, total = [], 0
        while limit is None or total < limit:
            want = READ_PIECE if limit is None else min(READ_PIECE, limit - total)
            try:
                chunk = self.response.read(want)
            except (TimeoutError, OSError, http.client.HTTPException) as error:
                raise _failed(error, connected=True) from error
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)

    def json_object(self) -> dict[str, Any]:
        """The whole body as one JSON object; IncompleteStream when it is not one."""
        try:
            value = json.loads(self.read())
        except ValueError as error:
            raise IncompleteStream(f"the reply is not whole JSON ({error})") from error
        if not isinstance(value, dict):
            raise IncompleteStream("the reply is not a JSON object")
        return value

    def status_error(self) -> StatusError:
        """The error a status of 300 or more stands for, with the server's own message
        alone (a JSON body's `message` field, not the rest of it: a server may echo the
        request, key and all), and anything secret that was sent masked in it."""
        assert self.response is not None
        status = self.response.status
        headers = {k.lower(): v for k, v in self.response.getheaders()}
        try:
            text = self.read(MAX_ERROR_BYTES).decode("utf-8", "replace")
        except ConnectionFailed:
            text = ""
        try:
            body: object = json.loads(text)
        except ValueError:
            body = None
        message = _message_of(body) if isinstance(body, dict) else text
        if 300 <= status < 400 and (moved := headers.get("location")):
            message = f"it redirects to {moved}: set that as the base URL"
        message = self.mask(message or self.response.reason)[:MAX_MESSAGE_CHARS]
        return StatusError(status, message, headers, body)


def _counted(readers: Readers) -> type[http.client.HTTPResponse]:
    """A response class that reads the socket through `readers.count`: every byte the
    server sends (status, headers, chunk framing, trailers, body) counts against one
    reply's cap, and tells the first-byte deadline that something came."""

    class Counted(http.client.HTTPResponse):
        def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
            super().__init__(sock, *args, **kwargs)
            self.fp.close()  # the buffered reader it made; ours counts what it reads
            self.fp = io.BufferedReader(_CountingSocket(sock, readers))

    return Counted


class _CountingSocket(io.RawIOBase):
    """The socket read through a file of its own, as http.client's reader does: the
    connection closes its socket after a reply that ends the connection (HTTP/1.0, a
    proxy), and the file keeps it open until the body is read and the reply closed.
    Reading the socket itself there failed with EBADF whenever the body had not come yet."""

    def __init__(self, sock: socket.socket, readers: Readers) -> None:
        self.raw, self.readers = sock.makefile("rb", buffering=0), readers

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size = self.raw.readinto(buffer) or 0
        self.readers.count(size)
        return size

    def close(self) -> None:
        self.raw.close()
        super().close()


def _message_of(body: object) -> str:
    """The message of an error body: OpenAI's `{"error": {"message": …}}`, or a bare one."""
    if not isinstance(body, dict):
        return ""
    error = body.get("error", body)
    if isinstance(error, dict):
        return str(error.get("message") or error.get("detail") or "")
    return str(error)


def _failed(error: BaseException, *, connected: bool) -> ConnectionFailed:
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, TimeoutError):
        return TimedOut(f"timed out ({text})", connected=connected)
    what = "the connection broke" if connected else "cannot connect"
    return ConnectionFailed(f"{what} ({text})", connected=connected)


def _tls_context() -> Any:
    """The system's certificates (and SSL_CERT_FILE); certifi's where the system has none."""
    import ssl

    context = ssl.create_default_context()
    if not context.cert_store_stats()["x509_ca"]:
        with contextlib.suppress(ImportError, OSError):
            import certifi

            context.load_verify_locations(certifi.where())
    return context


def _proxy_for(scheme: str, host: str, port: int) -> urllib.parse.SplitResult | None:
    """The proxy the environment names for `scheme` (or ALL_PROXY), unless NO_PROXY
    exempts `host` or `host:port`."""
    if not any(name.lower().endswith("_proxy") for name in os.environ):
        return None  # urllib.request, which reads them, is not worth importing then
    import urllib.request

    proxies = urllib.request.getproxies()
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(f"{host}:{port}"):
        return None
    found = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if found.scheme != "http":
        raise ConnectionFailed(
            f"the proxy {found.scheme}://{found.hostname}:{found.port} is not one gaffer can "
            "use: give it as http://HOST:PORT (an https:// URL is still tunnelled)",
            connected=False,
        )
    return found


def _proxy_auth(proxy: urllib.parse.SplitResult) -> dict[str, str]:
    if proxy.username is None:
        return {}
    user = urllib.parse.unquote(proxy.username)
    password = urllib.parse.unquote(proxy.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Proxy-Authorization": f"Basic {token}"}


def json_events(reply: Reply) -> Iterator[dict[str, Any]]:
    """Each event's data as a JSON object; one that is not is a broken stream."""
    for data in reply.events():
        try:
            value = json.loads(data)
        except ValueError as error:
            raise ConnectionFailed(f"an event is not JSON ({error})", connected=True) from error
        if isinstance(value, dict):
            yield value


class Fields:
    """A JSON object read by attribute, as workers/model/replies.py reads a chunk: a key
    that is not there reads as None."""

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values

    def __getattr__(self, name: str) -> Any:
        return as_fields(self._values.get(name))


def as_fields(value: Any) -> Any:
    if isinstance(value, dict):
        return Fields(value)
    if isinstance(value, list):
        return [as_fields(v) for v in value]
    return value
