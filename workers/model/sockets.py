"""The sockets under the `openai` SDK: each one registered for the thread that reads or
writes it, and every byte read counted for that thread's call (workers/model/cancel.py);
and where they go: the proxy the environment names (gaffer's choice, never httpx2's),
with the system's certificates.

The SDK speaks through httpx2, whose connection pool (httpcore2) takes a network backend.
This one wraps httpcore2's own: it registers a socket as it connects, before the request
is sent, so another thread can shut it while a local server reads a long prompt and has
sent nothing yet; and it counts what each read brings (status line, headers, chunk
framing, body, a proxy's CONNECT reply), so one reply cannot fill memory and the first
byte's deadline knows whether anything came. The pool does all its I/O in the calling
thread, so the thread that reads is the call's.

Duck-typed to httpcore2's NetworkBackend and NetworkStream: this module imports none of
httpcore2, httpx2 or openai, which cost half a second and are imported at the first call.
"""

from __future__ import annotations

import contextlib
import os
import urllib.parse
from typing import Any

from workers.model.cancel import Readers
from workers.model.http_errors import ConnectionFailed


class CountedStream:
    """One connection's stream, counted and registered as it is used."""

    def __init__(self, inner: Any, readers: Readers) -> None:
        self.inner, self.readers = inner, readers
        readers.attach(self)  # at connect: before the request is sent

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self.readers.attach(self)
        data: bytes = self.inner.read(max_bytes, timeout)
        self.readers.count(len(data))  # ReplyTooLarge goes up through the SDK untouched
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.readers.attach(self)
        self.inner.write(buffer, timeout)

    def close(self) -> None:
        self.readers.detach(self)
        self.inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> CountedStream:
        # TLS wraps the socket in a new one (the plain one is detached): that one is read.
        return CountedStream(
            self.inner.start_tls(ssl_context, server_hostname, timeout), self.readers
        )

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)

    def shutdown(self, how: int) -> None:
        """A cancel: the read blocked in the call's thread returns at once, and the server
        sees its client leave."""
        self.inner.get_extra_info("socket").shutdown(how)


class CountingBackend:
    """httpcore2's sync backend, its streams counted and registered."""

    def __init__(self, readers: Readers) -> None:
        import httpcore2

        self.readers, self.inner = readers, httpcore2.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> CountedStream:
        stream = self.inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return CountedStream(stream, self.readers)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> CountedStream:
        stream = self.inner.connect_unix_socket(path, timeout, socket_options)
        return CountedStream(stream, self.readers)

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


def tls_context() -> Any:
    """The system's certificates (and SSL_CERT_FILE); certifi's where the system has none."""
    import ssl

    context = ssl.create_default_context()
    if not context.cert_store_stats()["x509_ca"]:
        with contextlib.suppress(ImportError, OSError):
            import certifi

            context.load_verify_locations(certifi.where())
    return context


def proxy_for(scheme: str, host: str, port: int) -> urllib.parse.SplitResult | None:
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
