"""A reply read off the wire: a stream of chunks or a whole response, made into one
AssistantTurn; and the echo that shows streamed text once, across retries."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator
from typing import Any, Protocol

from workers.model import RUNAWAY, AssistantTurn, ServerTimes, TextSink, ToolCall, Usage
from workers.model.http_errors import APIError
from workers.model.runaway import Runaway, Watch, runaway
from workers.tools.workspace import shown_name

# Calls read from one reply at most; the stream is closed there (the server stops
# writing), and of those the loop runs the first few (workers/calls.py).
MAX_CALLS_READ = 256
# For a reply cut short with no usage sent: code and prose run about four to a token.
CHARS_PER_TOKEN = 4


class IncompleteStream(Exception):
    """The stream or response ended before the reply did: retried like a dropped connection."""


def from_stream(stream: Any, echo: Echo, model: str) -> AssistantTurn:
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finished: set[tuple[str, str]] = set()
    """(name, arguments) of every call the stream has moved past: one set, so a reply
    of thousands of calls is read in linear time."""
    last = -1
    finish: str | None = None
    usage: Any = None
    # A small model can loop on one phrase until the output cap: minutes on two cores.
    # The stream ends where the loop begins (closing it stops the server).
    watch = Watch()
    watches: dict[int, Watch] = {}  # one per call's arguments
    streamed = 0  # characters read: what a reply cut short cost, its usage never sent
    timings: Any = None
    for chunk in stream:
        if getattr(chunk, "usage", None):
            usage = chunk.usage
        timings = getattr(chunk, "timings", None) or timings
        model = getattr(chunk, "model", None) or model
        for choice in chunk.choices or []:
            delta = choice.delta
            if delta is not None and delta.content:
                text.append(delta.content)
                streamed += len(delta.content)
                echo.feed(delta.content)
                if (loop := watch.feed(delta.content)) is not None:
                    return cut_short(_ended(watch.text, loop, calls, usage, model), streamed)
            for part in (delta.tool_calls or []) if delta is not None else []:
                index = part.index if part.index is not None else last + 1
                if index not in calls and len(calls) >= MAX_CALLS_READ:
                    return cut_short(_turn(text, calls, usage, "tool_calls", model), streamed)
                if index not in calls and last in calls:
                    done = (calls[last]["name"], calls[last]["arguments"])
                    if done in finished:
                        # A small model can write the same call dozens of times in one
                        # reply, minutes of writing on two cores. Copies are never run:
                        # stop reading (closing the stream stops the server) and keep
                        # what came before.
                        del calls[last]
                        return cut_short(_turn(text, calls, usage, "tool_calls", model), streamed)
                    finished.add(done)
                last = max(last, index)
                slot = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
                if part.id:
                    slot["id"] = part.id
                if part.function is not None:
                    if part.function.name:
                        slot["name"] = part.function.name
                    if part.function.arguments:
                        slot["arguments"] += part.function.arguments
                        streamed += len(part.function.arguments)
                        looping = watches.setdefault(index, Watch()).feed(part.function.arguments)
                        if looping is not None:  # the call is never whole: it goes
                            del calls[index]
                            turn = _ended("".join(text), looping, calls, usage, model, keep=False)
                            return cut_short(turn, streamed)
            if choice.finish_reason:
                finish = choice.finish_reason
    if finish is None:
        raise IncompleteStream(
            f"the stream ended without a finish_reason after {len(''.join(text))} characters"
        )
    return _timed(_turn(text, calls, usage, finish, model), timings)


def cut_short(turn: AssistantTurn, streamed: int) -> AssistantTurn:
    """A reply whose stream gaffer closed early: the server never sent its usage, so its
    completion tokens are estimated from the characters read (still `reported` False),
    and budgets count them."""
    if turn.usage.reported:
        return turn
    estimate = Usage(completion_tokens=max(1, streamed // CHARS_PER_TOKEN), reported=False)
    return dataclasses.replace(turn, usage=estimate)


def _ended(
    text: str,
    loop: Runaway,
    calls: dict[int, dict[str, str]],
    usage: Any,
    model: str,
    *,
    keep: bool = True,
) -> AssistantTurn:
    """The reply ended in a runaway: its text up to the loop and one copy (`keep`: the
    loop was in the text), the calls whole before it."""
    kept = [text[: loop.keep] if keep else text]
    turn = _turn(kept, calls, usage, RUNAWAY, model)
    return dataclasses.replace(turn, runaway=loop.said)


def _turn(
    text: list[str], calls: dict[int, dict[str, str]], usage: Any, finish: str, model: str
) -> AssistantTurn:
    tool_calls = tuple(
        ToolCall(id=slot["id"] or f"call_{index}", name=slot["name"], arguments=slot["arguments"])
        for index, slot in sorted(calls.items())
    )
    return AssistantTurn(
        text="".join(text),
        tool_calls=tool_calls,
        usage=_usage(usage),
        finish_reason=finish,
        model=model,
    )


def from_response(response: Any, echo: Echo) -> AssistantTurn:
    if not response.choices:
        raise IncompleteStream("the response had no choices")
    choice = response.choices[0]
    text = choice.message.content or ""
    echo.feed(text)
    loop = runaway(text)  # nothing saved when it came whole, but it is never acted on
    tool_calls = tuple(
        ToolCall(id=c.id or f"call_{i}", name=c.function.name, arguments=c.function.arguments or "")
        for i, c in enumerate((choice.message.tool_calls or [])[:MAX_CALLS_READ])
    )
    turn = AssistantTurn(
        text=text[: loop.keep] if loop else text,
        tool_calls=tool_calls,
        usage=_usage(response.usage),
        finish_reason=RUNAWAY if loop else choice.finish_reason or "stop",
        model=response.model or "",
        runaway=loop.said if loop else "",
    )
    return _timed(turn, getattr(response, "timings", None))


def _timed(turn: AssistantTurn, timings: Any) -> AssistantTurn:
    """The turn with what the server says it spent (llama.cpp sends `timings` beside
    `usage`), where it says all four as numbers and the usage was reported: a reply cut
    short has none, and a broken or hostile endpoint's junk is not read."""
    said: list[Any] = [
        getattr(timings, key, None) if timings is not None else None
        for key in ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms")
    ]
    if not turn.usage.reported or not all(_number(value) for value in said):
        return turn
    read, reading, written, writing = said
    server = ServerTimes(int(read), reading / 1000, int(written), writing / 1000)
    return dataclasses.replace(turn, usage=dataclasses.replace(turn.usage, server=server))


def _number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value < 1e9
    )


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage(reported=False)
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    return Usage(
        prompt_tokens=usage.prompt_tokens or 0,
        completion_tokens=usage.completion_tokens or 0,
        cached_tokens=cached if isinstance(cached, int) else None,
    )


def begun_with(turn: AssistantTurn, opening: str) -> AssistantTurn:
    """The reply with the opening it was given, which a streaming server leaves out; ""
    when the opening is all there is (the model said nothing after it)."""
    if turn.tool_calls:
        return turn
    said = turn.text.removeprefix(opening)
    return dataclasses.replace(turn, text=opening + said if said.strip() else "")


def arguments_opened(turn: AssistantTurn) -> AssistantTurn:
    """A call begun for the model with its arguments' opening brace, which a streaming
    server leaves out of the arguments it parsed: put back where they read only with it."""
    calls = [
        dataclasses.replace(call, arguments="{" + call.arguments)
        if not _is_json(call.arguments) and _is_json("{" + call.arguments)
        else call
        for call in turn.tool_calls
    ]
    return dataclasses.replace(turn, tool_calls=tuple(calls))


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


class Echo:
    """Forwards streamed text to the view once, even across retries.

    A retried stream first replays text the user already saw; that part is swallowed.
    If the retry says something else, the view is told the response restarted.
    """

    def __init__(self, sink: TextSink | None) -> None:
        self._sink = sink
        self._shown = ""
        self._current = ""
        self._replaying = False

    def restart(self) -> None:
        self._current = ""
        self._replaying = bool(self._shown)

    def feed(self, delta: str) -> None:
        if self._sink is None or not delta:
            return
        self._current += delta
        if not self._replaying:
            self._sink(delta)
            self._shown = self._current
            return
        if self._shown.startswith(self._current):
            return
        self._replaying = False
        if self._current.startswith(self._shown):
            self._sink(self._current[len(self._shown) :])
        else:
            self._sink("\n[the retried response differs; it restarts here]\n" + self._current)
        self._shown = self._current


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


class Events(Protocol):
    """A streamed reply's events (workers/model/endpoint.py: Reply)."""

    def json_events(self) -> Iterator[dict[str, Any]]: ...


def chunks(reply: Events) -> Iterator[Fields]:
    """A Chat Completions stream's chunks; an `error` event inside it raised as APIError
    (servers send one for a fault mid-reply, llama.cpp for a reply it could not parse)."""
    for event in reply.json_events():
        if "error" in event:
            error = event["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise APIError(str(message or "an error event in the stream"), body=event)
        yield as_fields(event)


def sendable(value: Any) -> Any:
    """Messages with every file-name byte that is not UTF-8 written as `\\xNN`: whatever
    showed a name (a tool, the workspace glance, a task), the request still encodes."""
    if isinstance(value, str):
        return shown_name(value)
    if isinstance(value, list):
        return [sendable(v) for v in value]
    if isinstance(value, dict):
        return {k: sendable(v) for k, v in value.items()}
    return value
