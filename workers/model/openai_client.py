"""The real model: any OpenAI-compatible Chat Completions endpoint, streamed, with retries.

Spoken through the `openai` SDK (workers/model/endpoint.py), imported at the first call."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_exponential_jitter,
)
from tenacity.stop import stop_base

from workers.model import (
    MAX_STOP_TEXTS,
    REASONING_KEY,
    AssistantTurn,
    CallOptions,
    Message,
    ModelError,
    shown_url,
)
from workers.model.cancel import Readers, ReplyTooLarge, interruptible
from workers.model.endpoint import Endpoint
from workers.model.faults import (
    CONTEXT_ERROR,
    MAX_CALL_S,
    RETRYABLE_STATUS,
    UNREADABLE_OUTPUT,
    CallTooLong,
    caused_by,
    describe,
    error_code,
    first_contact,
    is_retryable,
    retry_after,
    short,
    stop_if_asked_to_wait_too_long,
    stop_when,
    too_long_to_wait,
    wrong_address,
)
from workers.model.http_errors import APIError, StatusError
from workers.model.replies import (
    Echo,
    arguments_opened,
    as_fields,
    begun_with,
    chunks,
    from_response,
    from_stream,
    sendable,
)
from workers.model.text_calls import HeldBack, as_text, read_reply


class OpenAIModel:
    """Chat Completions, retried by tenacity."""

    api_name = "Chat Completions"
    wire = "POST /chat/completions"

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        max_attempts: int = 6,
        request_timeout: float = 600.0,
        first_byte_timeout: float | None = None,
        stream: bool = True,
        backoff_initial: float = 1.0,
        backoff_max: float = 30.0,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        tool_prefill: str | None = None,
        tool_name_prefill: str | None = None,
        answer_prefill: str | None = None,
        varied_sampling: dict[str, float] | None = None,
        stop_texts: bool = False,
        calls_as_text: bool = False,
    ) -> None:
        self.name = model
        self.base_url = base_url
        self.shown_url = shown_url(base_url) or "https://api.openai.com/v1"
        """The endpoint as messages show it: never a password or key inside the URL."""
        self._has_key = bool(api_key)
        self._answered = False
        """The endpoint has answered a call of this run: from then on, a refused connection
        or a 404 is a fault to retry; before, it is a wrong address, said at once."""
        self.max_attempts = max_attempts
        self.request_timeout = request_timeout
        # A server that takes the request and sends nothing (hung, or a queue in front of
        # it) is given up on here, not at the end of request_timeout.
        self.first_byte_timeout = first_byte_timeout
        self.stream = stream
        # A model that never stops writing would hold a step forever; this caps one reply.
        self.max_output_tokens = max_output_tokens
        self.temperature = temperature
        # Servers that ignore tool_choice "required" (llama.cpp with a custom template) are
        # given the start of a call in the model's own format as the start of its reply.
        self.tool_prefill = tool_prefill
        self.tool_name_prefill = tool_name_prefill  # how it goes on to name the one tool
        # The same for an answer: with tools off, a small model may still write a call as
        # text; a reply begun in prose stays prose.
        self.answer_prefill = answer_prefill
        # Body fields the server honours, sent on a call after bad replies (CallOptions.vary)
        # beside the raised temperature: llama.cpp's repetition and DRY penalties. None
        # for OpenAI's own API, which refuses fields it does not know.
        self.varied_sampling = varied_sampling
        self.stop_texts = stop_texts
        """Whether a call's stop texts are sent (`stop`): not every model takes them."""
        self.calls_as_text = calls_as_text
        """Whether tools are described in the prompt and calls read from the reply's text
        (workers/model/text_calls.py), not sent as `tools` for the server to parse."""
        self._backoff = wait_exponential_jitter(
            multiplier=backoff_initial, max=backoff_max, jitter=backoff_initial
        )
        # Local servers (llama.cpp, Ollama, vLLM) accept any key, and some want one sent.
        self._readers = Readers()
        self._endpoint = Endpoint(base_url, api_key or "unused", self._readers)

    def available_models(self) -> list[str] | None:
        """The model ids the endpoint lists (GET /models), or None when it lists none."""
        try:
            with self._readers.counting(), self._endpoint.get("/models", timeout=10) as reply:
                listed = reply.json_object()["data"]
            return [str(m["id"]) for m in listed]
        except Exception:
            return None

    def complete(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]],
        options: CallOptions = CallOptions(),
    ) -> AssistantTurn:
        self._endpoint.prepare()
        echo = Echo(options.on_text)
        if tools and self.calls_as_text and not options.tools_off:
            # The model's words stream; its calls' JSON does not.
            echo = HeldBack(options.on_text, in_call=bool(self._opening_sent(tools, options)))
        cancelled, on_retry = options.cancelled, options.on_retry
        whole = max(MAX_CALL_S, self.request_timeout)
        timeout = whole if options.timeout is None else min(options.timeout, whole)
        deadline = time.monotonic() + timeout
        stop: stop_base = stop_after_attempt(self.max_attempts) | stop_if_asked_to_wait_too_long(
            deadline
        )
        if timeout is not None:
            stop = stop | stop_before_delay(timeout)
        if cancelled is not None:
            stop = stop | stop_when(cancelled)

        def before_sleep(state: RetryCallState) -> None:
            echo.restart()
            if on_retry is not None and state.outcome is not None and state.next_action:
                error = self._said(describe(state.outcome.exception()))
                on_retry(state.attempt_number, error, state.next_action.sleep)

        retrying = Retrying(
            stop=stop,
            wait=self._wait,
            retry=retry_if_exception(self._retryable),
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    call_timeout = self.request_timeout
                    if deadline is not None:
                        call_timeout = max(0.1, min(call_timeout, deadline - time.monotonic()))
                    turn = self._within(call_timeout, messages, tools, echo, options)
                    self._answered = True
                    turn = self._shaped(turn, tools, options, echo)
                    return _with_attempt(turn, attempt.retry_state.attempt_number)
        except Exception as error:
            if cancelled is not None and cancelled():
                raise ModelError(
                    "cancelled", "the call was cancelled and its connection closed"
                ) from error
            raise self._hidden(self._failure(error, retrying, deadline)) from error
        raise AssertionError("unreachable: tenacity either returns or raises")

    def _failure(self, error: Exception, retrying: Retrying, deadline: float | None) -> ModelError:
        if isinstance(error, ModelError):  # said by the reply itself (a failed response)
            return error
        if (why := too_long_to_wait(error, deadline)) is not None:
            asked = retry_after(error) or 0.0
            return ModelError(
                "rate_limited",
                f"{self.shown_url} asks to wait {asked:.0f} s before the "
                f"next try (Retry-After), {why}: {describe(error)}",
            )
        attempts = int(retrying.statistics.get("attempt_number", 1))
        return self._as_model_error(error, attempts)

    def _first_contact(self, error: BaseException) -> str:
        """What a wrong address looks like, in one line with a hint."""
        return first_contact(error, self.shown_url, self.base_url, self.api_name, self.wire)

    def _hidden(self, error: ModelError) -> ModelError:
        message = self._said(error.message)
        return error if message == error.message else ModelError(error.kind, message)

    def _said(self, text: str) -> str:
        """`text` with the endpoint's URL as messages show it, and the key and anything
        secret in the URL masked in any encoding (a server may echo what it was sent)."""
        if self.base_url:
            text = text.replace(self.base_url, self.shown_url)
        return self._endpoint.mask(text)

    def _within(
        self,
        seconds: float,
        messages: list[Message],
        tools: list[dict[str, Any]],
        echo: Echo,
        options: CallOptions,
    ) -> AssistantTurn:
        """One request, ended at `seconds` whatever the server sends: keep-alive comments
        or a byte a second reset only a read timeout, not this one."""
        started, cancelled = time.monotonic(), options.cancelled
        ends, caller = started + seconds, threading.get_ident()
        first_byte = self.first_byte_timeout or None

        came = [0]  # bytes the call read, as the block ended (the count goes with it)

        def silent_too_long() -> bool:
            waited = time.monotonic() - started
            got = self._readers.received(caller) or came[0]
            return first_byte is not None and waited > first_byte and not got

        def stop_reading() -> bool:
            over = time.monotonic() > ends or silent_too_long()
            return over or (cancelled is not None and cancelled())

        try:
            with interruptible(self._readers, stop_reading):
                try:
                    return self._once(messages, tools, echo, seconds, options)
                finally:
                    came[0] = self._readers.received(caller)
        except Exception as error:
            if (too_large := caused_by(error, ReplyTooLarge)) is not None:
                raise ModelError("malformed_output", str(too_large)) from error
            if silent_too_long() and not (cancelled is not None and cancelled()):
                raise ModelError(
                    "unavailable",
                    f"{self.shown_url} took the request and sent nothing for {self.first_byte_timeout:.0f} s "
                    "(first_byte_timeout): the server is hung or overloaded; raise "
                    "first_byte_timeout in the config if it is only slow to start",
                ) from error
            if time.monotonic() > ends and not (cancelled is not None and cancelled()):
                raise CallTooLong(
                    f"no whole reply within {seconds:.0f} s; the server kept the connection open"
                ) from error
            raise

    def _once(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]],
        echo: Echo,
        timeout: float,
        asking: CallOptions,
    ) -> AssistantTurn:
        messages = [{k: v for k, v in m.items() if k != REASONING_KEY} for m in sendable(messages)]
        request: dict[str, Any] = {"model": self.name, **self._offered(messages, tools, asking)}
        if cap := asking.capped_at(self.max_output_tokens):
            request["max_tokens"] = cap
        if asking.stop and self.stop_texts:
            request["stop"] = list(asking.stop[:MAX_STOP_TEXTS])
        if (temperature := asking.sampled_at(self.temperature)) is not None:
            request["temperature"] = temperature
        if asking.vary and self.varied_sampling:  # fields only some servers know
            request |= self.varied_sampling
        if not self.stream:
            with self._endpoint.post("/chat/completions", request, timeout=timeout) as reply:
                return from_response(as_fields(reply.json_object()), echo)
        request |= {"stream": True, "stream_options": {"include_usage": True}}
        with self._endpoint.post("/chat/completions", request, timeout=timeout) as reply:
            return from_stream(chunks(reply), echo, self.name)

    def _offered(
        self, messages: list[Message], tools: list[dict[str, Any]], asking: CallOptions
    ) -> dict[str, Any]:
        """The request's messages and tools: the tools sent (or, `calls_as_text`, said in
        the prompt), with the start of the reply where an answer or a call is asked for."""
        if not tools:
            return {"messages": messages}
        fields: dict[str, Any] = {} if self.calls_as_text else {"tools": tools}
        if self.calls_as_text:
            messages = as_text(messages, tools)
        opening: str | None = self._opening_sent(tools, asking)
        if asking.tools_off:
            opening = self.answer_prefill and self.answer_prefill + asking.answer_begins
            if not self.calls_as_text:
                fields["tool_choice"] = "none"
        elif asking.require_tool and not opening and not self.calls_as_text:
            fields["tool_choice"] = "required"
        if opening:
            messages = [*messages, {"role": "assistant", "content": opening}]
        return {"messages": messages, **fields}

    def _shaped(
        self,
        turn: AssistantTurn,
        tools: list[dict[str, Any]],
        options: CallOptions,
        shown: Echo,
    ) -> AssistantTurn:
        """The reply as the server's part of it left it: begun with the opening it was
        given, or its written calls read (`calls_as_text`)."""
        if options.tools_off and tools and self.answer_prefill:
            return begun_with(turn, self.answer_prefill + options.answer_begins)
        if tools and self.calls_as_text and not options.tools_off:
            return read_reply(turn, self._opening_sent(tools, options), shown)
        if options.require_tool and len(tools) == 1 and self.tool_name_prefill:
            return arguments_opened(turn)
        return turn

    def _opening_sent(self, tools: list[dict[str, Any]], asking: CallOptions) -> str:
        """The start of a call the reply is begun with where one is required, for a model
        with a tool prefill, naming the tool when only one is offered; "" otherwise."""
        if not (asking.require_tool and not asking.tools_off and self.tool_prefill):
            return ""
        if len(tools) == 1 and self.tool_name_prefill:
            return self.tool_prefill + self.tool_name_prefill.replace(
                "{name}", tools[0]["function"]["name"]
            )
        return self.tool_prefill

    def _wait(self, state: RetryCallState) -> float:
        backoff = self._backoff(state)
        error = state.outcome.exception() if state.outcome else None
        asked = retry_after(error)
        return backoff if asked is None else max(asked, 0.0)

    def _retryable(self, error: BaseException) -> bool:
        if not self._answered and wrong_address(error):
            return False  # nothing ever answered here: retrying only delays the news
        return is_retryable(error)

    def _as_model_error(self, error: BaseException, attempts: int) -> ModelError:
        where = self.shown_url
        if not self._answered and wrong_address(error):
            return ModelError("unavailable", self._first_contact(error))
        if isinstance(error, APIError) and UNREADABLE_OUTPUT.search(error.message):
            return ModelError(
                "malformed_output",
                f"the endpoint could not read the model's reply: {short(error.message)}",
            )
        if isinstance(error, StatusError):
            status, text = error.status_code, short(error.message)
            if status == 401 and not self._has_key:
                return ModelError(
                    "auth", f"{where} asks for an API key and none is set: set OPENAI_API_KEY"
                )
            if status in (401, 403):
                return ModelError("auth", f"{where} refused the API key ({status}): {text}")
            if status == 404:
                hint = "" if where.rstrip("/").endswith("/v1") else f" (did you mean {where}/v1?)"
                return ModelError(
                    "not_found",
                    f"model {self.name!r} or its endpoint not found at {where}{hint}: {text}",
                )
            if CONTEXT_ERROR.search(text) or error_code(error) == "context_length_exceeded":
                return ModelError(
                    "context_window",
                    f"the conversation no longer fits the model's context window: {text}",
                )
            if 400 <= status < 500 and status not in RETRYABLE_STATUS:
                return ModelError("bad_request", f"{where} rejected the request ({status}): {text}")
        hint = ""
        said = describe(error)
        if where.startswith("http://") and (
            "without sending a response" in said or "reset by peer" in said
        ):
            hint = "; if the server speaks TLS, its address begins https://"
        return ModelError(
            "unavailable",
            f"{where} failed after {attempts} attempt{'s' if attempts > 1 else ''}: {said}{hint}",
        )


def _with_attempt(turn: AssistantTurn, attempt: int) -> AssistantTurn:
    return dataclasses.replace(turn, attempt=attempt)
