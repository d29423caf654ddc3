"""The model seam: messages and tool schemas in, one assistant turn out."""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Message = dict[str, Any]
TextSink = Callable[[str], None]
REASONING_KEY = "reasoning_items"
"""Where an assistant message keeps its reasoning items (never sent as Chat Completions)."""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str
    """The raw JSON text the model wrote; parsed by the executor, so bad JSON is the
    model's error to fix, not ours."""


@dataclass(frozen=True)
class ServerTimes:
    """What a server says a call spent (llama.cpp's `timings`): reading the prompt tokens
    it had not cached, and writing the reply. Rates measured, where a fit of the calls'
    wall times cannot tell a cold server or a long context from a slow writer."""

    prompt_tokens: int
    prompt_seconds: float
    reply_tokens: int
    reply_seconds: float


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reported: bool = True
    """False when the endpoint sent no usage; budgets then count nothing for the call."""
    cached_tokens: int | None = None
    """Prompt tokens the server had in its cache from an earlier call (not read again);
    None when it does not say."""
    reasoning_tokens: int | None = None
    """Completion tokens the model spent reasoning (the Responses API says); None when
    the server does not say."""
    server: ServerTimes | None = None
    """What the server says the call spent; None where it does not say."""

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


RUNAWAY = "repetition"
"""The finish_reason of a reply gaffer ended in a runaway repetition (workers/model/runaway.py)."""


@dataclass(frozen=True)
class AssistantTurn:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    attempt: int = 1
    """Which try produced this turn (1 when the first call succeeded)."""
    model: str = ""
    reasoning: tuple[dict[str, Any], ...] = ()
    """A Responses turn that reasoned: its whole output (reasoning items and the items
    they led to), in order, as the server sent it; it goes back verbatim on the agent's
    next request (workers/model/responses_client.py)."""
    runaway: str = ""
    """What the reply kept repeating when the stream was ended there (finish_reason
    RUNAWAY): its text is what came before, with one copy."""

    @property
    def cut_off(self) -> bool:
        """The reply was ended before it was done: at the output cap, or in a runaway."""
        return self.finish_reason in ("length", RUNAWAY)

    def as_message(self) -> Message:
        """The turn as it goes back into the conversation, tool calls verbatim (and its
        reasoning items, which stay with the calls they preceded)."""
        message: Message = {"role": "assistant", "content": self.text or None}
        if self.reasoning:
            message[REASONING_KEY] = list(self.reasoning)
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        return message


RetryHook = Callable[[int, str, float], None]
"""Called before each retry with (attempt that failed, error text, seconds to wait)."""
Cancelled = Callable[[], bool]
"""True once the call's agent is cancelled: the call ends and its connection closes."""


MAX_STOP_TEXTS = 4
"""The most stop texts a Chat Completions server honours."""


@dataclass(frozen=True)
class CallOptions:
    """How one model call is made, besides the conversation and the tools it offers: one
    object, so a new setting touches the caller that sets it and the client that reads it."""

    on_text: TextSink | None = None
    """Streamed text, as it arrives."""
    on_retry: RetryHook | None = None
    timeout: float | None = None
    """Seconds for the whole call, retries included; None: the client's own limit."""
    cancelled: Cancelled | None = None
    tools_off: bool = False
    """The tools are sent but none may be called: the prompt stays the same as the steps
    before, so a server's prompt cache still holds it."""
    require_tool: bool = False
    """A tool call is asked for rather than an answer."""
    temperature: float | None = None
    """This call alone is sampled at this temperature instead of the configured one."""
    vary: int = 0
    """Bad replies in a row before this call (cut off, runaway, unreadable, or one the run
    had already): from 1, the call is sampled away from them (workers/guards/replies.py)."""
    max_tokens: int | None = None
    """This call's own output cap, when lower than the configured one: a reply that
    rewrites one file needs little more than the file."""

    stop: tuple[str, ...] = ()
    """Text that ends the reply where it would begin (Chat Completions' `stop`, at most
    four; the Responses API has none): a sample that starts copying out a test file."""
    answer_begins: str = ""
    """With `tools_off`, for a client that begins an answer for the model (its answer
    prefill): how the answer goes on after that opening. A task of numbered questions begins
    its first ("1. "): after "From what I found:", the bundled model wrote its calls out
    as text, asked twice, and a reader that had run for minutes gave no answer."""

    def capped_at(self, configured: int | None) -> int | None:
        """The output cap to send: the lower of this call's and the configured one."""
        if self.max_tokens is None:
            return configured
        return self.max_tokens if configured is None else min(configured, self.max_tokens)

    def sampled_at(self, configured: float | None) -> float | None:
        """The temperature to send: this call's own, else the configured one (None: the
        server's default), raised after bad replies in a row."""
        if self.temperature is not None:
            return self.temperature
        if self.vary and configured is not None:
            return max(
                configured, VARIED_TEMPERATURES[min(self.vary, len(VARIED_TEMPERATURES)) - 1]
            )
        return configured


# The temperatures a call is sampled at after one, and two or more, bad replies in a row
# (when the configured one is lower): near-greedy sampling answers the same prompt with
# the same reply, byte for byte; 0.7 still writes code that parses, and 1.0 is the
# model's own distribution (workers/aids/fresh_attempts.py).
VARIED_TEMPERATURES = (0.7, 1.0)


_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


_BLOCK = re.compile(r"```[a-zA-Z]*\s*(.*?)\s*```", re.DOTALL)
_CUT_CALL = re.compile(r"```[a-zA-Z]*\s*\{\s*\"name\"[^`]*\Z")
_OPENING = re.compile(r"^[A-Za-z][^\n`{}\"]{0,60}:[ \t]*(?:\n|$)")
"""A short first line ending in a colon ("From what I found:", the local model's answer
opening): no answer by itself."""


def written_call(text: str, tool_names: Iterable[str]) -> bool:
    """Whether a reply's text is only tool calls written out (fenced JSON, or `name(...)`),
    maybe after a short opening line, as small models do when tools are off or their call
    was not parsed: never an answer."""
    text = _OPENING.sub("", text.strip(), count=1)
    blocks = _BLOCK.findall(text)
    # Empty fences and a last call cut off at the output limit are no words either (the
    # requests reader's wrap-up: calls, empty fences, and a call cut in two).
    outside = _BLOCK.sub("", text)
    cut = _CUT_CALL.search(outside) is not None
    if (len(blocks) > 1 or cut) and not _CUT_CALL.sub("", outside).strip():
        written = [block for block in blocks if block.strip()]  # a cut one alone may be data
        return bool(written) and all(written_call(b, tool_names) for b in written)
    body = _FENCE.sub("", text.strip()).strip()
    if not body:
        return False
    names = set(tool_names)
    try:
        value = json.loads(body)
    except ValueError:
        return any(re.match(rf"{re.escape(name)}\s*\(", body) for name in names)
    calls = value if isinstance(value, list) else [value]
    return bool(calls) and all(
        isinstance(c, dict) and (c.get("name") in names or {"name", "arguments"} <= c.keys())
        for c in calls
    )


def shown_url(url: str | None) -> str | None:
    """An endpoint's address as logs and messages show it: without a user and password
    in it, or the values of query parameters (keys travel there too)."""
    if not url:
        return url
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = "&".join(
        f"{name}=***" if value else name
        for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


ModelErrorKind = Literal[
    "output_limit",
    "auth",
    "not_found",
    "bad_request",
    "context_window",
    "unavailable",
    "rate_limited",
    "config",
    "malformed_output",
    "cancelled",
]


class ModelError(Exception):
    """A fault the model cannot fix by itself: the run stops with this reason."""

    def __init__(self, kind: ModelErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.partial = ""
        """What the reply had streamed when it ended (a deadline cut it): the run's
        partial answer."""


Api = Literal["chat", "responses"]
"""The wire protocol: Chat Completions, or the Responses API."""


@dataclass(frozen=True)
class Endpoint:
    """A profile's own endpoint: where its requests go, and the variable its key is in."""

    base_url: str
    api_key_env: str | None = None


class MakeModel(Protocol):
    def __call__(
        self, name: str | None, api: Api | None = None, endpoint: Endpoint | None = None
    ) -> Model:
        """The model by name (None: the run's), over `api` (None: the run's), at
        `endpoint` (None: the run's)."""
        ...


class Model(Protocol):
    name: str

    def complete(
        self, messages: list[Message], tools: list[dict[str, Any]], options: CallOptions = ...
    ) -> AssistantTurn:
        """One assistant turn, made as `options` say (default: CallOptions()); raises
        ModelError."""
        ...
