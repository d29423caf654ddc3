"""A deterministic model that plays a script: for tests, benchmarks and demos of the loop."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from workers.model import (
    AssistantTurn,
    CallOptions,
    Message,
    ModelError,
    ToolCall,
    Usage,
)

Step = AssistantTurn | ModelError | Callable[[list[Message]], AssistantTurn]

_ids = itertools.count(1)


def say(text: str, *, prompt_tokens: int = 10, completion_tokens: int = 5) -> AssistantTurn:
    """A final answer."""
    return AssistantTurn(text=text, usage=Usage(prompt_tokens, completion_tokens))


def call(name: str, /, *, text: str = "", **arguments: Any) -> AssistantTurn:
    """One tool call with JSON-encoded arguments."""
    return calls((name, arguments), text=text)


def calls(*pairs: tuple[str, dict[str, Any] | str], text: str = "") -> AssistantTurn:
    """A parallel batch; a str argument is sent raw, to test malformed JSON."""
    tool_calls = tuple(
        ToolCall(
            id=f"call_{next(_ids)}",
            name=name,
            arguments=args if isinstance(args, str) else json.dumps(args),
        )
        for name, args in pairs
    )
    return AssistantTurn(
        text=text, tool_calls=tool_calls, usage=Usage(10, 5), finish_reason="tool_calls"
    )


class ScriptedModel:
    """Returns the scripted turns in order; records every conversation it was shown.

    `latency` sleeps per call to stand in for a real endpoint (benchmarks of overlap).
    """

    stop_texts = True
    """It records every call's stop texts (`stops`), as an endpoint that takes them."""

    def __init__(
        self, script: Iterable[Step], *, latency: float = 0.0, name: str = "scripted"
    ) -> None:
        self.name = name
        self._script = list(script)
        self._latency = latency
        self._lock = threading.Lock()
        self.seen: list[list[Message]] = []
        self.tools_seen: list[list[dict[str, Any]]] = []
        """The tool schemas offered with each call, in order."""
        self.required: list[bool] = []
        """Whether each call required a tool call (require_tool), in order."""
        self.paused: list[bool] = []
        """Whether each call had tools off (tools_off), in order."""
        self.temperatures: list[float | None] = []
        """Each call's own temperature (None: the configured one), in order."""
        self.varied: list[int] = []
        """How far each call was to be sampled away from bad replies before it, in order."""
        self.max_tokens: list[int | None] = []
        """Each call's own output cap (None: the configured one), in order."""
        self.stops: list[tuple[str, ...]] = []
        """Each call's stop text, in order."""
        self.answer_begins: list[str] = []
        """How each call's answer was to begin after an answer prefill, in order."""

    def complete(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]],
        options: CallOptions = CallOptions(),
    ) -> AssistantTurn:
        with self._lock:
            self.seen.append([dict(m) for m in messages])
            self.tools_seen.append(list(tools))
            self.required.append(options.require_tool)
            self.paused.append(options.tools_off)
            self.temperatures.append(options.temperature)
            self.varied.append(options.vary)
            self.max_tokens.append(options.max_tokens)
            self.stops.append(options.stop)
            self.answer_begins.append(options.answer_begins)
            if not self._script:
                raise ModelError("config", "the scripted model has no turns left")
            step = self._script.pop(0)
        if self._latency:
            time.sleep(self._latency)
        if isinstance(step, ModelError):
            raise step
        turn = step(messages) if callable(step) else step
        if options.on_text is not None and turn.text:
            options.on_text(turn.text)
        return turn

    @property
    def remaining(self) -> int:
        return len(self._script)

    def assert_used_up(self) -> None:
        """Every scripted turn was asked for: a test that ends early is not a pass."""
        if self._script:
            raise AssertionError(f"{len(self._script)} scripted turn(s) were never asked for")


class LoopingModel:
    """Calls one read-only tool for `steps` turns, then answers: for overhead benchmarks."""

    def __init__(self, steps: int, *, tool: str = "list_dir", latency: float = 0.0) -> None:
        self.name = "looping"
        self._steps = steps
        self._latency = latency
        self._tool = tool

    def complete(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]],
        options: CallOptions = CallOptions(),
    ) -> AssistantTurn:
        if self._latency:
            time.sleep(self._latency)
        done = sum(1 for m in messages if m["role"] == "tool")
        if done >= self._steps:
            return say("done")
        # A new argument each turn: any call seen before (a cycle of two included) is a
        # repetition, which the guard stops, as it should.
        return call(self._tool, path=f"step-{done}")


class RoutedModel:
    """One script per conversation, chosen by its first user message: for several agents
    sharing a model from different threads (delegation tests and benchmarks)."""

    def __init__(self, scripts: dict[str, Iterable[Step]], *, latency: float = 0.0) -> None:
        self.name = "routed"
        self._models = {
            task: ScriptedModel(script, latency=latency) for task, script in scripts.items()
        }

    def complete(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]],
        options: CallOptions = CallOptions(),
    ) -> AssistantTurn:
        task = next((m["content"] for m in messages if m["role"] == "user"), "")
        model = self._models.get(task)
        if model is None:
            raise ModelError("config", f"no script for the conversation that starts with {task!r}")
        return model.complete(messages, tools, options)

    def seen(self, task: str) -> list[list[Message]]:
        return self._models[task].seen
