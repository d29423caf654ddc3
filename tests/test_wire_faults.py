"""The SDK as the wire, against servers that misbehave as real ones do: an error body that
breaks off (retried, and no secret of the URL in any chain), gzip despite identity (never
inflated past the cap), a huge error page (read as far as its message), SSE blocks with
no data (skipped), a nested error event on the Responses API (a context overflow said as
one), a reply that began and then broke (not "sent nothing"), and a key a header cannot
carry (one line, the key nowhere). Found by an attacker's review of 8dc0d89."""

from __future__ import annotations

import contextlib
import gzip
import json
import time

import pytest

from tests.fake_openai import FakeOpenAI, error_reply
from tests.raw_server import Raw, all_chain, chunk, delta, good_stream, sse_head
from workers.model import ModelError
from workers.model.cancel import Readers
from workers.model.openai_client import OpenAIModel
from workers.model.responses_client import ResponsesModel

ASK = [{"role": "user", "content": "hi"}]
KEY, QS = "sk-KEY-abcdefghijkl", "qs-secret-0123456789"


def model(url: str, kind: type[OpenAIModel] = OpenAIModel, **kw: object) -> OpenAIModel:
    settings = {"max_attempts": 3, "backoff_initial": 0.01, "backoff_max": 0.02, **kw}
    m = kind(model="m", base_url=url, api_key=KEY, **settings)  # type: ignore[arg-type]
    m._answered = True
    return m


def ok_stream(conn, head, body):
    good_stream(conn, head, body, text="second try")


# 1. A status whose body breaks off (streamed path): raw httpx2 error, not retried, and the
#    HTTPStatusError with the full URL (query secret) in the chain.
def test_a_status_whose_body_breaks_off_is_retried_and_leaks_nothing() -> None:
    def cut_500(conn, head, body):
        conn.sendall(
            b'HTTP/1.1 500 X\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"er'
        )
        conn.shutdown(2)

    srv = Raw([cut_500, ok_stream])
    try:
        turn = model(srv.url + f"?api-key={QS}").complete(ASK, [])
    except ModelError as error:
        chain = all_chain(error)
        assert not [c for c in chain if QS in c], chain
        raise
    assert turn.text == "second try"


# 2. gzip despite Accept-Encoding: identity inflates past the 64 MB cap unnoticed.
def test_a_compressed_reply_is_not_inflated_past_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    import workers.model.cancel as cancel

    monkeypatch.setattr(cancel, "MAX_REPLY_BYTES", 1 << 20)
    body = json.dumps(
        {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "x"},
                    "finish_reason": "stop",
                }
            ],
            "pad": " " * (4 << 20),
        }
    ).encode()
    packed = gzip.compress(body)

    def gz(conn, head, req):
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
            b"Content-Length: %d\r\n\r\n" % len(packed) + packed
        )

    srv = Raw([gz])
    with pytest.raises(ModelError):
        model(srv.url, stream=False, max_attempts=1).complete(ASK, [])


# 3. An error body is read whole (up to 64 MB), decoded and masked before 1000 chars are kept.
def test_an_error_body_is_read_only_as_far_as_its_message_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    page = b"<html>" + b"x" * (8 << 20)
    counted = [0]
    real = Readers.count

    def count(self: Readers, size: int) -> None:
        counted[0] += size
        real(self, size)

    monkeypatch.setattr(Readers, "count", count)

    def big_503(conn, head, body):
        conn.sendall(
            b"HTTP/1.1 503 X\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(page)
        )
        with contextlib.suppress(OSError):
            conn.sendall(page)

    srv = Raw([big_503])
    with pytest.raises(ModelError):
        model(srv.url, max_attempts=1).complete(ASK, [])
    assert counted[0] <= 2 << 20, f"{counted[0]} bytes of an error page read"


# 4. SSE blocks with no data line (retry:, event: ping, a blank line after id:) are legal.
@pytest.mark.parametrize("prefix", [b"retry: 3000\n\n", b"event: ping\n\n", b"id: 1\n\n\n"])
def test_sse_blocks_without_data_are_skipped(prefix: bytes) -> None:
    def h(conn, head, body):
        conn.sendall(
            sse_head()
            + chunk(prefix)
            + chunk(f"data: {delta('hello')}\n\n".encode())
            + chunk(f"data: {delta(None, 'stop')}\n\n".encode())
            + chunk(b"data: [DONE]\n\n")
            + b"0\r\n\r\n"
        )

    srv = Raw([h])
    assert model(srv.url, max_attempts=1).complete(ASK, []).text == "hello"


# 5. Responses API: an error event that nests its error is read by _from_events again.
def test_a_nested_error_event_on_the_responses_api_names_the_context_window() -> None:
    event = {"type": "error", "error": {"code": "context_length_exceeded", "message": "too long"}}

    def h(conn, head, body):
        conn.sendall(sse_head() + chunk(f"data: {json.dumps(event)}\n\n".encode()) + b"0\r\n\r\n")

    srv = Raw([h])
    with pytest.raises(ModelError) as raised:
        model(srv.url, ResponsesModel).complete(ASK, [])
    assert raised.value.kind == "context_window"
    assert srv.conns == 1


# 6. A stream that has sent bytes and then drops is not "sent nothing (first_byte_timeout)".
def test_a_reply_that_began_is_not_said_to_have_sent_nothing() -> None:
    def drops(conn, head, body):
        conn.sendall(sse_head())
        for i in range(6):
            conn.sendall(chunk(f"data: {delta(f'w{i} ')}\n\n".encode()))
            time.sleep(0.2)
        conn.shutdown(2)

    srv = Raw([drops, ok_stream])
    assert model(srv.url, first_byte_timeout=0.5).complete(ASK, []).text == "second try"


# 8/9. A key an HTTP header cannot carry: said in one line, the key nowhere, not retried.
@pytest.mark.parametrize("key", [KEY + "\r", KEY + "\n", KEY + "\u2019"])
def test_a_key_a_header_cannot_carry_is_said_without_the_key(key: str) -> None:
    srv = Raw([good_stream])
    with pytest.raises((ModelError, ValueError)) as raised:
        OpenAIModel(model="m", base_url=srv.url, api_key=key).complete(ASK, [])
    assert not [c for c in all_chain(raised.value) if "abcdefghijkl" in c]
    assert "not whole JSON" not in str(raised.value)


def test_the_base_url_query_goes_as_given() -> None:
    srv = Raw([good_stream])
    model(srv.url + "?a=1&a=2&flag").complete(ASK, [])
    assert srv.heads[0].split(b" ")[1].endswith(b"?a=1&a=2&flag"), "no key folded, no flag ="


def test_a_custom_header_the_sdk_sends_is_masked_in_what_comes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "X-Gateway-Token: gw-token-0123456789")
    refused = [error_reply(403, "refused gw-token-0123456789")]
    with FakeOpenAI(refused) as server, pytest.raises(ModelError) as raised:
        model(server.base_url).complete(ASK, [])
    assert "gw-token-0123456789" not in raised.value.message
