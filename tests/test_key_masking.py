"""The API key never reaches a message, the terminal or the log, in any encoding a server
might echo it in: a real server on 127.0.0.1 answers 401, 400 and 500 with the key it was
sent, base64-, hex- and percent-encoded and reversed, inside its message and outside it."""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import gaffer
from workers.model import CallOptions, ModelError
from workers.model.masking import Mask
from workers.model.openai_client import OpenAIModel

KEY = "sk-proj-Zq8/Vw3+Lm9x_Tt4RrPp2QnE"
"""With `/` and `+`, which percent-encoding and URL-safe base64 change."""
SAID = "Incorrect API key provided"
"""The server's own words, which the user is shown."""
ECHO = "the request was"
"""Where a JSON body echoes the request outside its message: never shown."""


def encodings(key: str) -> list[str]:
    """The key as a server might echo it: as sent, in Basic auth, in a logged header."""
    sent = [key, f"Bearer {key}", f"user:{key}", f":{key}", f"ab:{key}"]
    b64 = [base64.b64encode(s.encode()).decode() for s in sent]
    b64 += [base64.urlsafe_b64encode(s.encode()).decode() for s in sent]
    b64 += [s.rstrip("=") for s in b64]
    return [
        *sent,
        *b64,
        key.encode().hex(),
        key.encode().hex().upper(),
        urllib.parse.quote(key, safe=""),
        urllib.parse.quote_plus(f"Bearer {key}"),
        "".join(f"%{b:02x}" for b in key.encode()),
        key[::-1],
    ]


def leaked(text: str) -> list[str]:
    return [form for form in encodings(KEY) if form in text]


def echoed(authorization: str) -> str:
    """Every form of what was sent, as a server that echoes its request would write it."""
    key = authorization.removeprefix("Bearer ")
    return " ".join(encodings(key))


class Echoing(BaseHTTPRequestHandler):
    """Answers every POST with `server.status` and a body that echoes the key: in its JSON
    message and outside it (`json`), as plain text (`text`), or in the status line's
    reason with no body (`reason`)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        echo, shape = echoed(self.headers["Authorization"]), self.server.shape  # type: ignore[attr-defined]
        if shape == "json":
            error = {"message": f"{SAID}: {echo}", "request": {"headers": dict(self.headers)}}
            body = json.dumps({"error": error, "echo": f"{ECHO}: {echo}"}).encode()
        else:
            body = f"{SAID}: {echo}".encode() if shape == "text" else b""
        self.send_response(self.server.status, echo if shape == "reason" else None)  # type: ignore[attr-defined]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(params=["json", "text", "reason"])
def shape(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=[401, 400, 500])
def server(request: pytest.FixtureRequest, shape: str) -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Echoing)
    httpd.status, httpd.shape = request.param, shape  # type: ignore[attr-defined]
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def test_the_mask_takes_the_key_out_in_every_form() -> None:
    mask = Mask([KEY])
    for form in encodings(KEY):
        assert leaked(mask(f"said <{form}> there")) == [], form
    assert mask("a key 'unused' and other words") == "a key 'unused' and other words"
    assert Mask(["unused"])("unused") == "unused", "too short a secret would blank words"


def test_a_refusal_shows_the_server_s_message_and_never_the_key(
    server: ThreadingHTTPServer, shape: str
) -> None:
    retries: list[str] = []
    model = OpenAIModel(
        model="m", base_url=url(server), api_key=KEY, max_attempts=2, backoff_initial=0.01
    )
    options = CallOptions(on_retry=lambda attempt, error, wait: retries.append(error))
    with pytest.raises(ModelError) as raised:
        model.complete([{"role": "user", "content": "x"}], [], options)
    assert leaked(raised.value.message) == []
    if shape != "reason":
        assert SAID in raised.value.message
    assert ECHO not in raised.value.message
    chain: BaseException | None = raised.value
    while chain is not None:  # the causes a traceback would print
        assert leaked(str(chain)) == [], type(chain)
        chain = chain.__cause__ or chain.__context__
    assert server.status != 500 or retries, "a 500 is retried"  # type: ignore[attr-defined]
    assert all(leaked(text) == [] for text in retries)


@pytest.mark.parametrize("shape", ["json"])
def test_neither_stderr_nor_the_log_carries_the_key(
    workspace: Path, server: ThreadingHTTPServer
) -> None:
    config = workspace.parent / "home" / ".config" / "gaffer"
    config.mkdir(parents=True)
    (config / "config.toml").write_text("max_attempts = 2\n")
    env = {"OPENAI_BASE_URL": url(server), "OPENAI_API_KEY": KEY, "GAFFER_MODEL": "m"}
    done = gaffer(workspace, "run", "hello", env=env)
    assert done.returncode == 1
    assert SAID in done.stderr
    logged = "".join(p.read_text() for p in (workspace.parent / "logs").glob("*.jsonl"))
    assert SAID in logged
    assert leaked(done.stderr) == [] and leaked(done.stdout) == [] and leaked(logged) == []
    if server.status == 500:  # type: ignore[attr-defined]
        assert '"llm_retry"' in logged
