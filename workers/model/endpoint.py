"""One OpenAI-compatible endpoint, spoken to through the `openai` SDK.

The SDK does the HTTP (its headers and user agent, the key as a bearer token, an
error per status, server-sent events); gaffer keeps what it relies on and the SDK does
not give: its sockets registered for cancelling and counted against one reply's cap
(workers/model/sockets.py), the proxy the environment names chosen here (and a SOCKS or
HTTPS proxy refused in one line), the system's certificates, no redirect followed (a
wrong URL is said, with where it points), the server's own message masked for secrets,
and the SDK's exceptions turned into the few the retry logic reads (workers/model/faults.py).
Retries are tenacity's (workers/model/openai_client.py): the SDK's are off.

`openai`, httpx2 and httpcore2 are imported at the first call (`prepare`), never with this
module: together they cost about half a second, which `gaffer --help` and every command
that calls no model should not pay.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import urllib.parse
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn, cast

from workers.model.cancel import Readers
from workers.model.http_errors import APIError, ConnectionFailed, StatusError, TimedOut
from workers.model.masking import Mask
from workers.model.replies import IncompleteStream
from workers.model.sockets import proxy_for, tls_context

OPENAI_URL = "https://api.openai.com/v1"
# A server that has not taken the connection by then is down or unreachable; a slow
# model is slow later, in the reply, which request_timeout covers.
CONNECT_TIMEOUT_S = 15.0
# A server's message is kept this long: enough for any real one, not a page of HTML.
MAX_MESSAGE_CHARS = 1000
# An error reply is read this far for its message; the rest is not needed.
MAX_ERROR_BYTES = 1 << 20


class Endpoint:
    """One base URL and its key: an SDK client per proxy in use, made at the first call."""

    def __init__(self, base_url: str | None, api_key: str, readers: Readers) -> None:
        self.url = urllib.parse.urlsplit(base_url or OPENAI_URL)
        if self.url.scheme not in ("http", "https") or not self.url.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        if not api_key.isascii() or any(c in api_key for c in "\r\n\0"):
            # said without the key: a header cannot carry it, and would echo it in its error
            raise ValueError(
                "the API key holds a character an HTTP header cannot carry (a line break, or "
                "one outside ASCII): check the variable or file it comes from"
            )
        self.readers, self.api_key = readers, api_key
        userinfo = self.url.netloc.rpartition("@")[0]
        pairs = urllib.parse.parse_qsl(self.url.query, keep_blank_values=True)
        self.mask = Mask(
            [api_key, userinfo, self.url.password, *(v for _, v in pairs), *_custom_values()]
        )
        """What was sent that is secret, taken out of any text a server sends back."""
        # The SDK puts a path after the base URL's raw path, query and all, and httpx2
        # turns a URL's user:password into Basic auth in place of the key: the query goes
        # as the SDK's default query, the user:password nowhere.
        host = self.url.netloc.rpartition("@")[2]
        self.sdk_base_url = urllib.parse.urlunsplit((self.url.scheme, host, self.url.path, "", ""))
        self.query = self.url.query
        """Sent as written (`?a=1&a=2&flag`), by gaffer's transport: the SDK's own query
        parameters would fold repeated keys and give a bare flag an `=`."""
        self._clients: dict[str | None, Any] = {}
        self._lock = threading.Lock()

    @staticmethod
    def prepare() -> None:
        """The SDK imported: done before a call's clocks start, so the import never
        counts against its first byte."""
        import httpcore2  # noqa: F401
        import openai  # noqa: F401

    def _client(self) -> Any:
        host, https = self.url.hostname or "", self.url.scheme == "https"
        proxy = proxy_for(self.url.scheme, host, self.url.port or (443 if https else 80))
        key = proxy.geturl() if proxy else None
        with self._lock:
            if (client := self._clients.get(key)) is None:
                client = self._clients[key] = _sdk_client(self, proxy)
        return client

    def post(self, path: str, body: dict[str, Any], *, timeout: float) -> Reply:
        """POST `body` as JSON to `path` under the base URL; StatusError at 300 and up."""
        # gaffer's own JSON (ASCII escapes): the SDK's encoder refuses a lone surrogate
        content = json.dumps(body).encode()
        return self._request("post", path, content, bool(body.get("stream")), timeout)

    def get(self, path: str, *, timeout: float) -> Reply:
        return self._request("get", path, None, False, timeout)

    def _request(
        self, method: str, path: str, content: bytes | None, stream: bool, timeout: float
    ) -> Reply:
        client = self._client()
        import httpx2
        import openai

        options = {"timeout": httpx2.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT_S))}
        reply = Reply(self)
        try:
            if method == "get":
                reply.value = client.get(path, cast_to=object, options=options)
            elif stream:
                reply.value = client.post(
                    path,
                    content=content,
                    cast_to=object,
                    options=options,
                    stream=True,
                    stream_cls=openai.Stream[object],
                )
            else:
                reply.value = client.post(path, content=content, cast_to=object, options=options)
            return reply
        except Exception as error:
            failed: Exception = error
        except BaseException:
            reply.close()
            raise
        reply.close()
        if isinstance(failed, json.JSONDecodeError | UnicodeDecodeError):  # a 2xx body, not JSON
            raise IncompleteStream(f"the reply is not whole JSON ({failed})") from failed
        _raise_ours(failed, self.mask)


class Reply:
    """What the SDK gave back: a stream of events, or the whole body as JSON."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.value: Any = None

    def __enter__(self) -> Reply:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if hasattr(self.value, "close"):
                self.value.close()  # the connection goes: the server sees its client leave
        self.endpoint.readers.detach()

    def json_events(self) -> Iterator[dict[str, Any]]:
        """Each event's JSON object, until [DONE]. An event with an `error` member is an
        APIError with the server's message; one that is not JSON or not UTF-8 is a
        broken stream."""
        # The SDK's decoder and its wrapping of httpx2's errors, gaffer's reading of each
        # event: a block without data (`retry:`, `event: ping`) skipped, [DONE] the end,
        # an `error` member left for the caller to read (a context overflow says so).
        try:
            for sse in self.value._iter_events():
                if not sse.data:
                    continue
                if sse.data.startswith("[DONE]"):
                    return
                try:
                    event = json.loads(sse.data)
                except ValueError as error:
                    raise ConnectionFailed(
                        f"an event is not JSON ({error})", connected=True
                    ) from error
                if isinstance(event, dict):
                    yield event
            return
        except ConnectionFailed:
            raise
        except ValueError as error:  # a line that is not UTF-8
            raise ConnectionFailed(f"an event is not JSON ({error})", connected=True) from error
        except Exception as error:
            failed: Exception = error
        _raise_ours(failed, self.endpoint.mask)

    def json_object(self) -> dict[str, Any]:
        """The whole body as one JSON object; IncompleteStream when it is not one."""
        value = self.value
        if isinstance(value, str | bytes):  # the SDK hands back a body it could not parse
            try:
                value = json.loads(value)
            except ValueError as error:
                raise IncompleteStream(f"the reply is not whole JSON ({error})") from error
        if not isinstance(value, dict):
            raise IncompleteStream("the reply is not a JSON object")
        return value


def _sdk_client(endpoint: Endpoint, proxy: urllib.parse.SplitResult | None) -> Any:
    """openai.OpenAI on an httpx2 client whose one transport is an httpcore2 pool on the
    counting backend: straight to the host, or through the proxy the environment named
    (CONNECT for https)."""
    import httpcore2
    import httpx2
    import openai

    from workers.model.sockets import CountingBackend

    pool_args: dict[str, Any] = {
        "ssl_context": tls_context(),
        "max_connections": None,
        # A connection per request: never a pooled socket a cancel shut, nor a thread's
        # registration left on an idle one.
        "max_keepalive_connections": 0,
        "network_backend": CountingBackend(endpoint.readers),
    }
    if proxy is None:
        pool = httpcore2.ConnectionPool(**pool_args)
    else:
        auth = None
        if proxy.username is not None:
            user = urllib.parse.unquote(proxy.username)
            auth = (user, urllib.parse.unquote(proxy.password or ""))
        where = proxy.netloc.rpartition("@")[2]
        pool = httpcore2.HTTPProxy(proxy_url=f"http://{where}", proxy_auth=auth, **pool_args)

    class Transport(httpx2.HTTPTransport):
        """httpx2's transport (its requests, responses and exceptions) on that pool: it
        takes no network backend of its own, and uses only `_pool`. A reply is never
        inflated (only its bytes on the wire are counted against the cap), and an error's
        body is read here as far as its message needs: one that breaks off or times out
        still leaves the status to be said and retried, and no chain to carry the URL."""

        def __init__(self, pool: Any) -> None:
            self._pool = pool

        def handle_request(self, request: Any) -> Any:
            if endpoint.query:
                request.url = request.url.copy_with(query=endpoint.query.encode())
            response = super().handle_request(request)
            coding = response.headers.get("content-encoding", "identity").strip().lower()
            if coding not in ("", "identity"):
                response.close()
                raise httpx2.DecodingError(
                    f"the server sent its reply {coding}-encoded, though asked for identity"
                )
            if response.status_code < 300:
                return response
            body = bytearray()
            try:
                for piece in cast(Iterable[bytes], response.stream):
                    body += piece
                    if len(body) >= MAX_ERROR_BYTES:
                        break
            except httpx2.TransportError:
                pass  # what came is what there is to say
            finally:
                response.close()
            kept = [
                (name, value)
                for name, value in response.headers.multi_items()
                if name.lower() not in ("content-length", "transfer-encoding")
            ]
            return httpx2.Response(
                response.status_code,
                headers=kept,
                content=bytes(body[:MAX_ERROR_BYTES]),
                extensions=response.extensions,
                request=request,
            )

    http = httpx2.Client(
        transport=Transport(pool),  # a transport given: none of httpx2's env proxies
        trust_env=False,
        follow_redirects=False,
        auth=httpx2.Auth(),  # never Basic auth from a URL's user:password
    )
    headers = {
        "Accept-Encoding": "identity",  # every byte counted is a byte kept
        # Said here, or OPENAI_CUSTOM_HEADERS="Authorization: ..." replaces the key.
        "Authorization": f"Bearer {endpoint.api_key}",
    }
    return openai.OpenAI(  # OpenAI-Organization and -Project from the environment, its own
        api_key=endpoint.api_key,
        base_url=endpoint.sdk_base_url,
        default_headers=headers,
        max_retries=0,  # tenacity's, in openai_client.py
        http_client=http,
    )


def _as_ours(error: BaseException, mask: Mask) -> BaseException:
    """The SDK's exception as one the retry logic reads; anything else as it is
    (ReplyTooLarge, a bug)."""
    import httpx2
    import openai

    if isinstance(error, openai.APIStatusError):
        return _status_error(error.response, mask)
    if isinstance(error, openai.APIConnectionError):  # a timeout too
        cause = error.__cause__
        never = (
            httpx2.ConnectError,
            httpx2.ConnectTimeout,
            httpx2.ProxyError,
            httpx2.UnsupportedProtocol,
        )
        connected = not isinstance(cause, never)
        text = f"{type(cause).__name__}: {cause}" if cause is not None else str(error)
        if isinstance(error, openai.APITimeoutError):
            return TimedOut(f"timed out ({text})", connected=connected)
        what = "the connection broke" if connected else "cannot connect"
        return ConnectionFailed(f"{what} ({text})", connected=connected)
    if isinstance(error, openai.APIError):  # an error event inside a stream
        body = error.body  # the event's `error` member: an object, or a bare string
        message = body if isinstance(body, str) and body else error.message
        return APIError(mask(str(message)), body=body)
    return error


def _raise_ours(error: Exception, mask: Mask) -> NoReturn:
    """Raise the SDK's exception as ours, outside the block that caught it: the SDK's
    own message may hold what a server echoed (the key), so it is in no chain. A
    connection fault is raised from httpx2's exception, whose chain reaches the refused
    connection, the unknown host or the certificate (faults.py reads them)."""
    import openai

    ours = _as_ours(error, mask)
    if ours is error:
        raise error
    if isinstance(error, openai.APIConnectionError) and error.__cause__ is not None:
        raise ours from error.__cause__
    raise ours from None


def _status_error(response: Any, mask: Mask) -> StatusError:
    """The error a status of 300 or more stands for, with the server's own message
    alone (a JSON body's `message` field, not the rest of it: a server may echo the
    request, key and all), and anything secret that was sent masked in it."""
    status = response.status_code
    headers = {k.lower(): v for k, v in response.headers.items()}
    text = response.text
    try:
        body: object = json.loads(text)
    except ValueError:
        body = None
    message = _message_of(body) if isinstance(body, dict) else text
    if 300 <= status < 400 and (moved := headers.get("location")):
        message = f"it redirects to {moved}: set that as the base URL"
    message = mask(message or response.reason_phrase)[:MAX_MESSAGE_CHARS]
    return StatusError(status, message, headers, body)


def _message_of(body: object) -> str:
    """The message of an error body: OpenAI's `{"error": {"message": …}}`, or a bare one."""
    if not isinstance(body, dict):
        return ""
    error = body.get("error", body)
    if isinstance(error, dict):
        return str(error.get("message") or error.get("detail") or "")
    return str(error)


def _custom_values() -> list[str]:
    """The values of OPENAI_CUSTOM_HEADERS ("Name: value" a line), which the SDK sends
    with every request: secret as the key is, in whatever a server sends back."""
    lines = os.environ.get("OPENAI_CUSTOM_HEADERS", "").splitlines()
    return [value.strip() for line in lines if (value := line.partition(":")[2]).strip()]
