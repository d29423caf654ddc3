"""The HTTP under the model clients (workers/model/wire.py), against real servers on
127.0.0.1: TLS with a certificate the system is told to trust (and one it is not),
a forward proxy named by the environment and NO_PROXY's exemption, the key and the
organisation sent as the SDK sent them."""

from __future__ import annotations

import http.client
import shutil
import ssl
import subprocess
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
