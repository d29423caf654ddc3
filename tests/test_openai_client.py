"""The real openai client path against a real local server speaking the wire protocol."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import pytest

from tests.fake_openai import FakeOpenAI, Reply, error_reply, prefilled_model
from workers.model import CallOptions, ModelError, ServerTimes
from workers.model.openai_client import OpenAIModel
from workers.model.responses_client import ResponsesModel


def model_for(server: FakeOpenAI, *, stream: bool = True, max_attempts: int = 4) -> OpenAIModel:
    return OpenAIModel(
        model="fake-model",
        base_url=server.base_url,
        api_key="test-key",
        max_attempts=max_attempts,
        stream=stream,
        backoff_initial=0.01,
        backoff_max=0.05,
        request_timeout=10,
    )


TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]


@pytest.mark.parametrize("stream", [True, False])
def test_text_answer_with_usage(stream: bool) -> None:
    with FakeOpenAI(
        [Reply(text="Hello there, world.", prompt_tokens=30, completion_tokens=5)]
    ) as server:
        shown: list[str] = []
        turn = model_for(server, stream=stream).complete(
            [{"role": "user", "content": "hi"}], TOOLS, CallOptions(on_text=shown.append)
        )
    assert turn.text == "Hello there, world."
    assert "".join(shown) == "Hello there, world."
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (30, 5)
    assert turn.attempt == 1 and turn.finish_reason == "stop"
    request = server.requests[0]
    assert request["model"] == "fake-model" and request["tools"] == TOOLS
    assert bool(request.get("stream")) is stream


def test_a_calls_own_output_cap_and_stop_text_are_sent() -> None:
    """The lower of the call's cap and the configured one; the stop text as the server's
    `stop` (Chat Completions) where the endpoint takes it (`stop_texts`: some models
    refuse the field), and not at all where the API has none (Responses)."""
    replies = [Reply(text="a"), Reply(text="b"), Reply(text="c"), Reply(text="d")]
    stop = CallOptions(max_tokens=500, stop=("t.py\n```",))
    with FakeOpenAI(replies) as server:
        chat = model_for(server)
        chat.max_output_tokens = 768
        asked = [{"role": "user", "content": "hi"}]
        chat.complete(asked, [], stop)
        chat.stop_texts = True
        chat.complete(asked, [], stop)
        chat.complete(asked, [], CallOptions(max_tokens=900))
        responses = ResponsesModel(
            model="fake-model", base_url=server.base_url, api_key="k", stop_texts=True
        )
        responses.complete(asked, [], stop)
    refused, first, second, third = server.requests
    assert refused["max_tokens"] == 500 and "stop" not in refused, "not unless it takes it"
    assert first["max_tokens"] == 500 and first["stop"] == ["t.py\n```"]
    assert second["max_tokens"] == 768 and "stop" not in second, "the configured cap is lower"
    assert third["max_output_tokens"] == 500 and "stop" not in third


@pytest.mark.parametrize("stream", [True, False])
def test_parallel_tool_calls_are_assembled_from_deltas(stream: bool) -> None:
    calls = [
        ("read_file", json.dumps({"path": "a.py"})),
        ("grep", json.dumps({"pattern": "def \\w+"})),
    ]
    with FakeOpenAI([Reply(text="Looking.", tool_calls=calls)]) as server:
        turn = model_for(server, stream=stream).complete([{"role": "user", "content": "go"}], TOOLS)
    assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("read_file", {"path": "a.py"}),
        ("grep", {"pattern": "def \\w+"}),
    ]
    assert len({c.id for c in turn.tool_calls}) == 2
    message = turn.as_message()
    assert message["content"] == "Looking."
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["read_file", "grep"]


def test_429_honours_retry_after_and_reports_each_retry() -> None:
    with FakeOpenAI(
        [error_reply(429, "slow down", **{"Retry-After": "0.3"}), Reply(text="ok")]
    ) as server:
        retries: list[tuple[int, str, float]] = []
        turn = model_for(server).complete(
            [{"role": "user", "content": "x"}],
            [],
            CallOptions(on_retry=lambda *a: retries.append(a)),
        )
    assert turn.text == "ok" and turn.attempt == 2
    assert len(retries) == 1 and retries[0][0] == 1 and "429" in retries[0][1]
    assert retries[0][2] == pytest.approx(0.3)
    gap = server.request_times[1] - server.request_times[0]
    assert gap >= 0.28


def test_retry_after_ms_header_wins() -> None:
    with FakeOpenAI(
        [
            error_reply(503, "busy", **{"retry-after-ms": "150", "Retry-After": "30"}),
            Reply(text="ok"),
        ]
    ) as server:
        waits: list[float] = []
        model_for(server).complete(
            [{"role": "user", "content": "x"}],
            [],
            CallOptions(on_retry=lambda a, e, w: waits.append(w)),
        )
    assert waits == [pytest.approx(0.15)]


@pytest.mark.parametrize("status", [500, 502, 503, 408, 409])
def test_transient_statuses_are_retried(status: int) -> None:
    with FakeOpenAI([error_reply(status, "transient"), Reply(text="recovered")]) as server:
        turn = model_for(server).complete([{"role": "user", "content": "x"}], [])
    assert turn.text == "recovered" and len(server.requests) == 2


@pytest.mark.parametrize(
    ("status", "kind"), [(400, "bad_request"), (401, "auth"), (403, "auth"), (404, "not_found")]
)
def test_client_errors_are_never_retried(status: int, kind: str) -> None:
    with (
        FakeOpenAI([error_reply(status, "no"), Reply(text="never reached")]) as server,
        pytest.raises(ModelError) as raised,
    ):
        model_for(server).complete([{"role": "user", "content": "x"}], [])
    assert raised.value.kind == kind
    assert len(server.requests) == 1


def test_context_length_error_is_named_and_not_retried() -> None:
    reply = error_reply(
        400, "This model's maximum context length is 8192 tokens.", code="context_length_exceeded"
    )
    with FakeOpenAI([reply, Reply(text="never")]) as server, pytest.raises(ModelError) as raised:
        model_for(server).complete([{"role": "user", "content": "x"}], [])
    assert raised.value.kind == "context_window"
    assert "context window" in raised.value.message
    assert len(server.requests) == 1


def test_stream_cut_midway_is_retried_and_text_is_not_shown_twice() -> None:
    text = "The answer is forty-two, as computed."
    with FakeOpenAI([Reply(text=text, cut_after_chunks=4), Reply(text=text)]) as server:
        shown: list[str] = []
        retries: list[str] = []
        turn = model_for(server).complete(
            [{"role": "user", "content": "x"}],
            [],
            CallOptions(on_text=shown.append, on_retry=lambda a, e, w: retries.append(e)),
        )
    assert turn.text == text and turn.attempt == 2
    assert "".join(shown) == text
    assert len(retries) == 1


def test_stream_without_finish_reason_is_retried() -> None:
    with FakeOpenAI(
        [Reply(text="partial", no_finish=True), Reply(text="partial and whole")]
    ) as server:
        shown: list[str] = []
        turn = model_for(server).complete(
            [{"role": "user", "content": "x"}], [], CallOptions(on_text=shown.append)
        )
    assert turn.text == "partial and whole"
    assert "".join(shown) == "partial and whole"
    assert len(server.requests) == 2


def test_a_retry_that_says_something_else_is_marked_not_merged() -> None:
    with FakeOpenAI(
        [Reply(text="first version of text", cut_after_chunks=3), Reply(text="second")]
    ) as server:
        shown: list[str] = []
        turn = model_for(server).complete(
            [{"role": "user", "content": "x"}], [], CallOptions(on_text=shown.append)
        )
    assert turn.text == "second"
    assert "".join(shown).endswith("restarts here]\nsecond")


def test_gives_up_after_max_attempts_with_a_clear_reason() -> None:
    with FakeOpenAI([error_reply(500, "down")] * 3) as server, pytest.raises(ModelError) as raised:
        model_for(server, max_attempts=3).complete([{"role": "user", "content": "x"}], [])
    assert raised.value.kind == "unavailable"
    assert "HTTP 500" in raised.value.message
    assert len(server.requests) == 3


def test_connection_refused_is_unavailable() -> None:
    model = OpenAIModel(
        model="m",
        base_url="http://127.0.0.1:9/v1",
        api_key="k",
        max_attempts=2,
        backoff_initial=0.01,
    )
    with pytest.raises(ModelError) as raised:
        model.complete([{"role": "user", "content": "x"}], [])
    assert raised.value.kind == "unavailable"


@pytest.mark.parametrize("responses", [False, True])
def test_an_endpoint_that_takes_the_request_and_sends_nothing_fails_at_the_first_byte_deadline(
    responses: bool,
) -> None:
    with FakeOpenAI([Reply(text="too late", delay=30)] * 2) as server:
        kind = ResponsesModel if responses else OpenAIModel
        model = kind(
            model="m", base_url=server.base_url, api_key="k", first_byte_timeout=1, max_attempts=3
        )
        started = time.monotonic()
        with pytest.raises(ModelError) as raised:
            model.complete([{"role": "user", "content": "x"}], [])
        took = time.monotonic() - started
    assert took < 5, f"ended at the 1 s first-byte deadline, not the request's (took {took:.1f} s)"
    assert raised.value.kind == "unavailable"
    assert "took the request and sent nothing for 1 s (first_byte_timeout)" in raised.value.message
    assert len(server.requests) == 1, "a hung endpoint is not asked again"


def test_a_slow_reply_that_has_begun_is_not_cut_by_the_first_byte_deadline() -> None:
    slow = Reply(text="slow but alive", chunk_size=2, drip_s=0.3)
    with FakeOpenAI([slow]) as server:
        model = OpenAIModel(model="m", base_url=server.base_url, api_key="k", first_byte_timeout=1)
        turn = model.complete([{"role": "user", "content": "x"}], [])
    assert turn.text == "slow but alive"


def test_a_port_nothing_listens_on_is_said_as_such_at_once() -> None:
    model = OpenAIModel(model="m", base_url="http://127.0.0.1:9/v1", api_key="k", max_attempts=5)
    started = time.monotonic()
    with pytest.raises(ModelError) as raised:
        model.complete([{"role": "user", "content": "x"}], [])
    assert time.monotonic() - started < 3, "a refused first connection is not retried"
    assert "nothing is listening at 127.0.0.1:9 (connection refused)" in raised.value.message


@pytest.mark.parametrize(
    "errno, why",
    [(socket.EAI_NONAME, "does not resolve"), (socket.EAI_AGAIN, "no network")],
    ids=["unknown name", "no network"],
)
def test_a_host_that_does_not_resolve_gets_its_own_hint(
    errno: int, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resolver is the machine's; it answers here as it would with the name unknown,
    or with no network at all (errno EAI_AGAIN, "Temporary failure in name resolution")."""

    def resolve(*args: object, **kwargs: object) -> list[object]:
        raise socket.gaierror(errno, "resolver says no")

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    model = OpenAIModel(model="m", base_url="https://api.example.test/v1", api_key="k")
    with pytest.raises(ModelError) as raised:
        model.complete([{"role": "user", "content": "x"}], [])
    assert raised.value.kind == "unavailable"
    assert "api.example.test" in raised.value.message and why in raised.value.message


def test_deadline_stops_retrying() -> None:
    with FakeOpenAI([error_reply(429, "wait", **{"Retry-After": "5"})] * 3) as server:
        started = time.monotonic()
        with pytest.raises(ModelError):
            model_for(server).complete(
                [{"role": "user", "content": "x"}], [], CallOptions(timeout=1.0)
            )
    assert time.monotonic() - started < 3
    assert len(server.requests) == 1


def test_a_reply_the_server_cannot_parse_is_the_models_mistake_not_retried() -> None:
    message = "Failed to parse tool call arguments as JSON: parse error at line 1"
    with (
        FakeOpenAI([error_reply(500, message), Reply(text="never")]) as server,
        pytest.raises(ModelError) as raised,
    ):
        model_for(server).complete([{"role": "user", "content": "x"}], [])
    assert raised.value.kind == "malformed_output"
    assert len(server.requests) == 1


def test_an_unreadable_reply_reported_inside_a_stream_is_not_retried() -> None:
    error = {
        "message": "The model produced output that does not match the expected peg-native format"
    }
    with (
        FakeOpenAI([Reply(error=error), Reply(text="never")]) as server,
        pytest.raises(ModelError) as raised,
    ):
        model_for(server).complete([{"role": "user", "content": "x"}], [])
    assert raised.value.kind == "malformed_output"
    assert len(server.requests) == 1


def test_a_cancelled_call_closes_its_connection_and_the_server_sees_it() -> None:
    """A worker whose caller gave up must not leave the server computing for nobody."""
    with FakeOpenAI([Reply(text="too late", delay=30)]) as server:
        model = OpenAIModel(model="m", base_url=server.base_url, api_key="k")
        cancel = threading.Event()
        threading.Timer(0.5, cancel.set).start()
        started = time.monotonic()
        with pytest.raises(ModelError) as raised:
            model.complete(
                [{"role": "user", "content": "hi"}], [], CallOptions(cancelled=cancel.is_set)
            )
        ended = time.monotonic()
        assert raised.value.kind == "cancelled"
        assert ended - started < 5, "the call waited for the server instead of hanging up"
        deadline = time.monotonic() + 5
        while not server.disconnects and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.disconnects and server.disconnects[0] - started < 5
        assert len(server.requests) == 1, "a cancelled call is not retried"


def test_tools_off_keeps_the_tools_in_the_prompt_and_cached_tokens_are_read() -> None:
    """The wrap-up turn must not change the prompt's prefix, or a local server reads the
    whole conversation again; what the server had cached is recorded."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with FakeOpenAI([Reply(text="answer", prompt_tokens=900, cached_tokens=880)]) as server:
        model = OpenAIModel(model="m", base_url=server.base_url, api_key="k")
        turn = model.complete(
            [{"role": "user", "content": "hi"}], tools, CallOptions(tools_off=True)
        )
    assert server.requests[0]["tools"] == tools and server.requests[0]["tool_choice"] == "none"
    assert turn.usage.cached_tokens == 880 and turn.usage.prompt_tokens == 900


def test_a_reply_that_repeats_one_call_is_cut_at_the_first_copy() -> None:
    """What the small local model did: the same call forty times in one reply."""
    same = ("list_dir", '{"path": "src"}')
    reply = Reply(tool_calls=[("grep", '{"pattern": "x"}'), same, same, same, same])
    with FakeOpenAI([reply]) as server:
        model = OpenAIModel(model="m", base_url=server.base_url, api_key="k")
        turn = model.complete([{"role": "user", "content": "hi"}], [])
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("grep", '{"pattern": "x"}'),
        same,
    ]


def test_a_required_tool_call_is_asked_for_as_the_server_understands() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    hi = [{"role": "user", "content": "hi"}]
    with FakeOpenAI([Reply(text="a"), Reply(text="b")]) as server:
        OpenAIModel(model="m", base_url=server.base_url, api_key="k").complete(
            hi, tools, CallOptions(require_tool=True)
        )
        local = OpenAIModel(
            model="m", base_url=server.base_url, api_key="k", tool_prefill="```json\n"
        )
        local.complete(hi, tools, CallOptions(require_tool=True))
    assert server.requests[0]["tool_choice"] == "required"
    # A llama.cpp server ignores tool_choice with a custom template; a reply begun the
    # way its template opens a call is parsed as one.
    assert "tool_choice" not in server.requests[1]
    assert server.requests[1]["messages"][-1] == {"role": "assistant", "content": "```json\n"}


def test_a_required_call_with_one_tool_offered_is_begun_naming_it() -> None:
    """The arguments the server parsed lack the brace it was given; they are whole again,
    and a call that parses as it came is left as it is."""
    tools = [{"type": "function", "function": {"name": "delegate", "parameters": {}}}]
    hi = [{"role": "user", "content": "hi"}]
    cut = Reply(tool_calls=[("delegate", ' "profile": "explorer", "task": "look" }')])
    whole = Reply(tool_calls=[("delegate", '{"task": "look"}')])
    with FakeOpenAI([cut, whole, whole]) as server:
        local = prefilled_model(server)
        first = local.complete(hi, tools, CallOptions(require_tool=True))
        second = local.complete(hi, tools, CallOptions(require_tool=True))
        local.complete(hi, [*tools, *tools], CallOptions(require_tool=True))
    opening = '```json\n{"name": "delegate", "arguments": {'
    assert server.requests[0]["messages"][-1] == {"role": "assistant", "content": opening}
    assert server.requests[2]["messages"][-1] == {"role": "assistant", "content": "```json\n"}
    assert first.tool_calls[0].arguments == '{ "profile": "explorer", "task": "look" }'
    assert second.tool_calls[0].arguments == '{"task": "look"}'


def test_an_answer_begun_for_the_model_keeps_its_opening_and_the_opening_alone_is_nothing() -> None:
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    hi = [{"role": "user", "content": "hi"}]
    with FakeOpenAI([Reply(text=" loop.py holds it."), Reply(text=" \n")]) as server:
        local = OpenAIModel(
            model="m", base_url=server.base_url, api_key="k", answer_prefill="From what I found:"
        )
        said = local.complete(hi, tools, CallOptions(tools_off=True))
        nothing = local.complete(hi, tools, CallOptions(tools_off=True))
    assert server.requests[0]["messages"][-1] == {
        "role": "assistant",
        "content": "From what I found:",
    }
    assert said.text == "From what I found: loop.py holds it."
    assert nothing.text == ""


def test_an_answer_begun_at_a_numbered_item_keeps_the_whole_opening() -> None:
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    with FakeOpenAI([Reply(text="core.py\n2. termui.py")]) as server:
        local = OpenAIModel(
            model="m", base_url=server.base_url, api_key="k", answer_prefill="Found:\n"
        )
        asked = CallOptions(tools_off=True, answer_begins="1. ")
        said = local.complete([{"role": "user", "content": "hi"}], tools, asked)
    assert server.requests[0]["messages"][-1] == {"role": "assistant", "content": "Found:\n1. "}
    assert said.text == "Found:\n1. core.py\n2. termui.py"


@pytest.mark.parametrize(
    ("asked", "timeout", "why"),
    [("1000", None, "more than gaffer waits (60 s)"), ("30", 5.0, "more than the run has left")],
)
def test_a_long_retry_after_stops_at_once_with_the_reason(
    asked: str, timeout: float | None, why: str
) -> None:
    with FakeOpenAI([error_reply(429, "wait", **{"Retry-After": asked})] * 3) as server:
        started = time.monotonic()
        with pytest.raises(ModelError) as raised:
            model_for(server).complete(
                [{"role": "user", "content": "x"}], [], CallOptions(timeout=timeout)
            )
    assert time.monotonic() - started < 2 and len(server.requests) == 1
    assert raised.value.kind == "rate_limited"
    assert (
        f"asks to wait {asked} s before the next try (Retry-After), {why}" in raised.value.message
    )


@pytest.mark.parametrize(
    "reply",
    [
        Reply(text="never whole", keep_alive_for=30),
        Reply(text="a trickle of a reply that never ends in time", chunk_size=1, drip_s=0.5),
    ],
    ids=["keep-alive comments", "a byte at a time"],
)
def test_the_whole_call_deadline_holds_whatever_the_server_sends(reply: Reply) -> None:
    with FakeOpenAI([reply, reply]) as server:
        model = model_for(server, max_attempts=2)
        started = time.monotonic()
        with pytest.raises(ModelError) as raised:
            model.complete([{"role": "user", "content": "x"}], [], CallOptions(timeout=2.0))
        took = time.monotonic() - started
    assert took < 4, f"the 2 s deadline held within 2 s (took {took:.1f} s)"
    assert "no whole reply within 2 s" in raised.value.message


@pytest.mark.parametrize("responses", [False, True])
def test_a_call_of_its_own_temperature_is_sent_and_the_next_uses_the_configured(
    responses: bool,
) -> None:
    """A fresh attempt samples one call hotter (workers/aids/fresh_attempts.py); the calls
    around it keep the configured temperature, on either API."""
    with FakeOpenAI([Reply(text="one"), Reply(text="two")]) as server:
        kind = ResponsesModel if responses else OpenAIModel
        model = kind(model="fake-model", base_url=server.base_url, api_key="k", temperature=0.1)
        model.complete([{"role": "user", "content": "hi"}], [], CallOptions(temperature=0.8))
        model.complete([{"role": "user", "content": "hi"}], [])
    assert [r["temperature"] for r in server.requests] == [0.8, 0.1]


@pytest.mark.parametrize("responses", [False, True])
def test_a_reply_past_the_size_cap_is_cut_and_not_asked_again(
    responses: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workers.model import cancel

    monkeypatch.setattr(cancel, "MAX_REPLY_BYTES", 2 * 1024 * 1024)
    # one long line, and no loop (which would end the stream before the cap)
    counting = " ".join(map(str, range(1_300_000)))
    huge = Reply(text=counting, chunk_size=256 * 1024)
    with FakeOpenAI([huge, Reply(text="never asked")]) as server:
        kind = ResponsesModel if responses else OpenAIModel
        model = kind(model="fake-model", base_url=server.base_url, api_key="k", max_attempts=3)
        with pytest.raises(ModelError) as raised:
            model.complete([{"role": "user", "content": "x"}], [])
    assert "more than 2 MB for one reply" in raised.value.message
    assert len(server.requests) == 1, "a reply too large is not asked for again"


def test_one_call_with_every_retry_is_capped_whatever_the_attempts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from workers.model import openai_client

    monkeypatch.setattr(openai_client, "MAX_CALL_S", 3.0)
    slow = Reply(text="a trickle", chunk_size=1, drip_s=0.5)
    with FakeOpenAI([slow] * 20) as server:
        model = OpenAIModel(
            model="fake-model",
            base_url=server.base_url,
            api_key="k",
            max_attempts=20,
            request_timeout=2,
            backoff_initial=0.01,
            backoff_max=0.05,
        )
        started = time.monotonic()
        with pytest.raises(ModelError):
            model.complete([{"role": "user", "content": "x"}], [])
    assert time.monotonic() - started < 6, "20 tries of 2 s stop at the 3 s cap"


@pytest.mark.parametrize("stream", [True, False])
def test_the_time_a_server_says_it_spent_reading_and_writing_is_read(stream: bool) -> None:
    """llama.cpp sends `timings` beside the usage: the pace takes its rates from them.
    Timings that are not four finite numbers (a string, a negative, NaN, a bool, one
    missing, an object) are not read, and the reply is read all the same."""
    said = {"prompt_n": 880, "prompt_ms": 14080.0, "predicted_n": 20, "predicted_ms": 2000}
    odd: list[Any] = [
        "fast",
        {**said, "prompt_ms": -1},
        {**said, "predicted_ms": float("nan")},
        {**said, "predicted_n": True},
        {"prompt_n": 3, "prompt_ms": 3},
        {**said, "prompt_ms": {"ms": 1}},
    ]
    replies = [Reply(text="answer", timings=t) for t in [said, *odd]]
    with FakeOpenAI(replies) as server:
        model = OpenAIModel(model="m", base_url=server.base_url, api_key="k", stream=stream)
        turns = [model.complete([{"role": "user", "content": "hi"}], []) for _ in replies]
    assert turns[0].usage.server == ServerTimes(880, 14.08, 20, 2.0)
    for turn in turns[1:]:
        assert turn.usage.server is None and turn.text == "answer"
