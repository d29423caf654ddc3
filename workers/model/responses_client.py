"""The Responses API (`--api responses`): the same Model as the Chat Completions client,
the same retries, deadlines, cancellation and error kinds (it is that client with another
request and reply), over `POST /responses`.

The conversation stays in the loop's chat-shaped messages and is written as Responses
input items for each request. A turn with reasoning keeps its whole output, in order, in
the assistant message it came with, and it goes back verbatim next time, so its chain of
thought (and the server's prompt cache) carries across tool calls; compaction folds whole
messages, so an item never parts from the calls it preceded. `store` is off by default:
the server keeps nothing, and sends reasoning back encrypted for the next request.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from workers.model import (
    REASONING_KEY,
    RUNAWAY,
    AssistantTurn,
    CallOptions,
    Message,
    ModelError,
    ToolCall,
    Usage,
)
from workers.model.faults import CONTEXT_ERROR, short
from workers.model.openai_client import OpenAIModel
from workers.model.replies import Echo, IncompleteStream, cut_short, sendable
from workers.model.runaway import Watch


class ResponsesModel(OpenAIModel):
    api_name = "Responses"
    wire = "POST /responses"

    def __init__(self, *, store: bool = False, **settings: Any) -> None:
        super().__init__(**settings)
        self.store = store
        self.calls_as_text = False  # the Responses API's calls are its own items, always

    def _once(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]],
        echo: Echo,
        timeout: float,
        asking: CallOptions,
    ) -> AssistantTurn:
        request: dict[str, Any] = {
            "model": self.name,
            "input": input_items(sendable(messages)),
            "store": self.store,
        }
        if not self.store:  # reasoning comes back encrypted, to be sent again next turn
            request["include"] = ["reasoning.encrypted_content"]
        if tools:
            request["tools"] = [function_tool(tool) for tool in tools]
            if asking.tools_off:
                request["tool_choice"] = "none"
            elif asking.require_tool:
                request["tool_choice"] = "required"
        if cap := asking.capped_at(self.max_output_tokens):
            request["max_output_tokens"] = cap
        if (temperature := asking.sampled_at(self.temperature)) is not None:
            request["temperature"] = temperature
        if not self.stream:
            with self._endpoint.post("/responses", request, timeout=timeout) as reply:
                body = reply.json_object()
            return _turn(body, echo, self.name, streamed_text=None)
        request["stream"] = True
        with self._endpoint.post("/responses", request, timeout=timeout) as reply:
            return _from_events(_sse_events(reply.json_events()), echo, self.name)


def input_items(messages: list[Message]) -> list[dict[str, Any]]:
    """The chat-shaped conversation as Responses input items, reasoning items verbatim."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "user"):
            items.append({"role": role, "content": _text(message.get("content"))})
        elif role == "assistant" and message.get(REASONING_KEY):
            # A turn that reasoned goes back as the server sent it: every output item, in
            # its order (reasoning, then the item it led to), ids included.
            items.extend(message[REASONING_KEY])
        elif role == "assistant":
            if message.get("content"):
                items.append({"role": "assistant", "content": _text(message["content"])})
            for call in message.get("tool_calls") or []:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": call["function"]["name"],
                        "arguments": call["function"]["arguments"],
                    }
                )
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message["tool_call_id"],
                    "output": _text(message.get("content")),
                }
            )
    return items


def function_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions tool schema in the Responses shape (flat, no `function` key)."""
    function = tool.get("function", tool)
    shaped = {"type": "function", "name": function["name"]}
    for key in ("description", "parameters"):
        if key in function:
            shaped[key] = function[key]
    return shaped


def _sse_events(events: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The stream's events; a connection that breaks mid-stream is an IncompleteStream,
    retried like the chat path's."""
    try:
        yield from events
    except IncompleteStream:
        raise
    except Exception as error:  # the HTTP stack's own, whatever it is: the stream broke
        raise IncompleteStream(f"the stream broke off: {short(str(error))}") from error


def _from_events(events: Iterator[dict[str, Any]], echo: Echo, model: str) -> AssistantTurn:
    """A streamed response: text deltas to the view as they come; the reply is what the
    `response.completed` (or `.incomplete`) event holds. A stream that ends without one
    is retried; a failed response says why."""
    text: list[str] = []
    watch = Watch()  # a reply looping on one phrase ends there (workers/model/runaway.py)
    for event in events:
        kind = event.get("type", "")
        if kind == "response.output_text.delta":
            delta = str(event.get("delta") or "")
            text.append(delta)
            echo.feed(delta)
            if (loop := watch.feed(delta)) is not None:
                kept = watch.text[: loop.keep]
                turn = AssistantTurn(
                    text=kept,
                    usage=Usage(reported=False),
                    finish_reason=RUNAWAY,
                    model=model,
                    runaway=loop.said,
                )
                return cut_short(turn, len(watch.text))
        elif kind in ("response.completed", "response.incomplete"):
            return _turn(event.get("response") or {}, echo, model, streamed_text="".join(text))
        elif kind == "response.failed":
            _raise_failure((event.get("response") or {}).get("error") or {})
        elif kind == "error":
            _raise_failure(event)
    raise IncompleteStream(
        f"the stream ended without response.completed after {len(''.join(text))} characters"
    )


def _turn(
    response: dict[str, Any], echo: Echo, model: str, *, streamed_text: str | None
) -> AssistantTurn:
    if response.get("status") == "failed":
        _raise_failure(response.get("error") or {})
    reasoning: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    said: list[str] = []
    for item in response.get("output") or []:
        kind = item.get("type")
        if kind == "reasoning":
            reasoning.append(item)
        elif kind == "function_call":
            call_id = str(item.get("call_id") or item.get("id") or f"call_{len(calls)}")
            calls.append(ToolCall(call_id, str(item.get("name")), str(item.get("arguments") or "")))
        elif kind == "message":
            said += [
                str(part.get("text") or "")
                for part in item.get("content") or []
                if part.get("type") == "output_text"
            ]
    text = "".join(said)
    if streamed_text is None:
        echo.feed(text)
    incomplete = response.get("status") == "incomplete"
    finish = "tool_calls" if calls else "length" if incomplete else "stop"
    return AssistantTurn(
        text=text if text or streamed_text is None else streamed_text,
        tool_calls=tuple(calls),
        usage=_usage(response.get("usage")),
        finish_reason=finish,
        model=str(response.get("model") or model),
        reasoning=tuple(response.get("output") or []) if reasoning else (),
    )


def _usage(usage: dict[str, Any] | None) -> Usage:
    if not usage:
        return Usage(reported=False)
    cached = (usage.get("input_tokens_details") or {}).get("cached_tokens")
    reasoning = (usage.get("output_tokens_details") or {}).get("reasoning_tokens")
    return Usage(
        prompt_tokens=int(usage.get("input_tokens") or 0),
        completion_tokens=int(usage.get("output_tokens") or 0),
        cached_tokens=cached if isinstance(cached, int) else None,
        reasoning_tokens=reasoning if isinstance(reasoning, int) else None,
    )


def _raise_failure(error: dict[str, Any]) -> None:
    """A response the server gave up on: too long a conversation is the caller's to fix;
    anything else is retried like a dropped stream."""
    message = short(str(error.get("message") or error or "the response failed"))
    if error.get("code") == "context_length_exceeded" or CONTEXT_ERROR.search(message):
        raise ModelError(
            "context_window",
            f"the conversation no longer fits the model's context window: {message}",
        )
    raise IncompleteStream(f"the response failed: {message}")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: their text, in order
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)
