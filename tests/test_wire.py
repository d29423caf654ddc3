"""The HTTP under the model clients: the `openai` SDK (workers/model/endpoint.py),
against real servers on 127.0.0.1: TLS with a certificate the system is told to trust
(and one it is not), a forward proxy named by the environment and NO_PROXY's exemption,
the key and the organisation as headers, the SDK's own user agent."""

from __future__ import annotations

import contextlib
import http.client
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.fake_openai import FakeOpenAI, Reply
from workers.model import ModelError
from workers.model.openai_client import OpenAIModel
from workers.model.responses_client import ResponsesModel

ASK = [{"role": "user", "content": "hi"}]


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, and its key."""
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subject = ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    files = ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            *subject,
            *files,
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def over_tls(server: FakeOpenAI, cert: Path, key: Path) -> str:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.server.socket = context.wrap_socket(server.server.socket, server_side=True)
    return server.base_url.replace("http://", "https://")


@pytest.mark.parametrize("kind", [OpenAIModel, ResponsesModel])
def test_https_to_a_server_the_system_trusts(
    kind: type[OpenAIModel],
    certificate: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cert, key = certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with FakeOpenAI([Reply(text="over TLS")]) as server:
        url = over_tls(server, cert, key)
        turn = kind(model="m", base_url=url, api_key="k").complete(ASK, [])
    assert turn.text == "over TLS"


def test_https_to_a_server_nobody_trusts_fails_at_once_saying_why(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = certificate
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with FakeOpenAI([Reply(text="never")] * 6) as server:
        url = over_tls(server, cert, key)
        with pytest.raises(ModelError) as raised:
            OpenAIModel(model="m", base_url=url, api_key="k").complete(ASK, [])
    assert "CERTIFICATE_VERIFY_FAILED" in raised.value.message
    assert server.requests == [], "a certificate refused is not asked again and again"


def test_a_scheme_that_does_not_match_the_server_is_said_as_such(
    certificate: tuple[Path, Path],
) -> None:
    cert, key = certificate
    with FakeOpenAI([Reply(text="never")] * 6) as server:
        tls = server.base_url.replace("http://", "https://")
        with pytest.raises(ModelError) as raised:
            OpenAIModel(model="m", base_url=tls, api_key="k").complete(ASK, [])
        assert "answered in plain HTTP, not TLS" in raised.value.message
        assert f"use {server.base_url} as the base URL" in raised.value.message
        plain = over_tls(server, cert, key).replace("https://", "http://")
        with pytest.raises(ModelError) as raised:
            OpenAIModel(model="m", base_url=plain, api_key="k", max_attempts=1).complete(ASK, [])
        assert "if the server speaks TLS, its address begins https://" in raised.value.message


class ForwardProxy:
    """A plain-HTTP forward proxy: notes each request line, relays it, sends back the reply."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                proxy.seen.append(f"{self.command} {self.path}")
                target = urllib.parse.urlsplit(self.path)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                upstream.request("POST", target.path, body=body, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.getheader("Content-Type") or "")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> ForwardProxy:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[ForwardProxy]:
    for name in ("no_proxy", "NO_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with ForwardProxy() as running:
        monkeypatch.setenv("HTTP_PROXY", running.url)
        monkeypatch.setenv("http_proxy", running.url)
        yield running


def test_a_proxy_from_the_environment_carries_the_request(proxy: ForwardProxy) -> None:
    with FakeOpenAI([Reply(text="via the proxy")]) as server:
        model = OpenAIModel(model="m", base_url=server.base_url, api_key="k", stream=False)
        turn = model.complete(ASK, [])
    assert turn.text == "via the proxy"
    assert proxy.seen == [f"POST {server.base_url}/chat/completions"]


def test_no_proxy_exempts_a_host(proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    with FakeOpenAI([Reply(text="straight there")]) as server:
        turn = OpenAIModel(model="m", base_url=server.base_url, api_key="k").complete(ASK, [])
    assert turn.text == "straight there" and proxy.seen == []


def test_the_key_and_the_organisation_go_as_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-1")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-2")
    with FakeOpenAI([Reply(text="ok")]) as server:
        OpenAIModel(model="m", base_url=server.base_url, api_key="sk-x").complete(ASK, [])
    (sent,) = server.headers
    assert sent["authorization"] == "Bearer sk-x"
    assert sent["openai-organization"] == "org-1" and sent["openai-project"] == "proj-2"
    assert sent["user-agent"].startswith("OpenAI/Python "), "the call went through the SDK"


def test_a_custom_header_from_the_environment_does_not_replace_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "Authorization: Bearer someone-else")
    with FakeOpenAI([Reply(text="ok")]) as server:
        OpenAIModel(model="m", base_url=server.base_url, api_key="sk-x").complete(ASK, [])
    assert server.headers[0]["authorization"] == "Bearer sk-x"


def test_the_sdk_is_imported_by_a_call_not_by_the_client_module() -> None:
    """`gaffer --help` and every command that calls no model never pay for it."""
    code = (
        "import sys, workers.model.openai_client, workers.model.responses_client; "
        "print(sorted(m for m in ('openai', 'httpx2', 'httpcore2') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_base_url_that_is_not_http_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="not an http"):
        OpenAIModel(model="m", base_url="ftp://example.invalid/v1", api_key="k")


def test_a_redirect_is_said_with_where_it_points_not_followed() -> None:
    from tests.fake_openai import error_reply

    moved = error_reply(301, "Moved", location="https://example.invalid/v1/chat/completions")
    with FakeOpenAI([moved]) as server, pytest.raises(ModelError) as raised:
        OpenAIModel(model="m", base_url=server.base_url, api_key="k").complete(ASK, [])
    assert "redirects to https://example.invalid/v1" in raised.value.message
    assert len(server.requests) == 1


def raw_server(respond: Any) -> tuple[socket.socket, str]:
    """A server on 127.0.0.1 that reads one request and calls `respond(connection)`."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with contextlib.suppress(OSError):
            connection, _ = listener.accept()
            with connection:
                connection.recv(65536)
                respond(connection)

    threading.Thread(target=serve, daemon=True).start()
    return listener, f"http://127.0.0.1:{listener.getsockname()[1]}/v1"


def test_every_byte_on_the_wire_counts_against_a_reply_s_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chunk framing a server pads without end (1-byte chunks with 60 KB extensions)
    is counted like the body: the call stops at the cap, not at the deadline."""
    from workers.model import cancel

    monkeypatch.setattr(cancel, "MAX_REPLY_BYTES", 2 * 1024 * 1024)

    def padded_chunks(connection: socket.socket) -> None:
        connection.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        for _ in range(1000):
            connection.sendall(b"1;" + b"x" * 60_000 + b"\r\n:\r\n")

    listener, url = raw_server(padded_chunks)
    with listener:
        model = OpenAIModel(model="m", base_url=url, api_key="k", max_attempts=1)
        with pytest.raises(ModelError) as raised:
            model.complete(ASK, [])
    assert "more than 2 MB for one reply" in raised.value.message


def test_an_error_body_whose_error_is_a_string_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    def plain_error(connection: socket.socket) -> None:
        body = b'{"error": "the model is loading"}'
        connection.sendall(
            b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )

    listener, url = raw_server(plain_error)
    with listener, pytest.raises(ModelError) as raised:
        OpenAIModel(model="m", base_url=url, api_key="k").complete(ASK, [])
    assert "the model is loading" in raised.value.message


def test_a_server_that_echoes_the_key_does_not_get_it_into_the_message() -> None:
    from tests.fake_openai import error_reply

    echoed = error_reply(401, "invalid key: sk-live-0123456789abcdef")
    with FakeOpenAI([echoed]) as server, pytest.raises(ModelError) as raised:
        model = OpenAIModel(model="m", base_url=server.base_url, api_key="sk-live-0123456789abcdef")
        model.complete(ASK, [])
    assert "sk-live" not in raised.value.message and "***" in raised.value.message


def test_a_socks_or_https_proxy_is_refused_saying_how_to_give_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("no_proxy", "NO_PROXY", "http_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    monkeypatch.setenv("all_proxy", "socks5://127.0.0.1:1080")
    with FakeOpenAI([Reply(text="never")]) as server, pytest.raises(ModelError) as raised:
        OpenAIModel(model="m", base_url=server.base_url, api_key="k").complete(ASK, [])
    assert "give it as http://HOST:PORT" in raised.value.message and server.requests == []


def test_a_base_url_without_its_scheme_is_one_line(tmp_path: Path) -> None:
    from tests.helpers import gaffer

    done = gaffer(tmp_path, "run", "hi", env={"OPENAI_BASE_URL": "localhost:8080/v1"})
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "must begin with http:// or https://" in done.stderr
