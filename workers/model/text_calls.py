"""Tool calls written as text, read by gaffer instead of the server (`calls_as_text`).

A server that parses a model's tool calls refuses a whole reply it cannot read as its
format: llama.cpp derives its parser from the chat template, and the bundled 1.5B model
often puts several calls in one fenced block, one per line, where the template renders
one block a call. On the bench, 1 to 6 of each reader's replies came back as an error,
with nothing of what the model meant, and some readers never ran a call at all.

Sent no `tools`, a server returns the reply as text. The tools are then described in
the system message here, earlier calls and their results go back as text in the form
the model was asked for, and the calls are read from the reply:
- a fenced JSON block per call (the form asked for), or several calls in one block, one
  object a line, or a list of them;
- `<tool_call>` tags (Qwen's and Hermes' own form), or a reply that is one call alone.
An object that names a tool that is not there still goes to the executor, which says
so; text that reads as a call attempt and is not one (broken JSON) makes the reply
unreadable, as the server said before, unless other calls in it were whole.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from workers.model import AssistantTurn, Message, ModelError, TextSink, ToolCall

INTRO = "\n\n# Tools\n\nYou can call these functions (? marks an optional argument):"
HOW = (
    "\n\nTo call a function, reply with one fenced JSON block per call, and nothing "
    'after them:\n```json\n{"name": "<function-name>", "arguments": {<arguments>}}\n```\n'
    "Calls that do not depend on each other go in the same reply, one block after "
    "another. When you have the answer, reply in plain text with no JSON block."
)
DEFAULT_SYSTEM = "You are a helpful coding assistant."
# Where a written call begins: the asked-for fence, a tag, or a bare object.
OPENINGS = ("```", "<tool_call>", '{"name"')
_BLOCK = re.compile(
    r"```[A-Za-z]*[ \t]*\n?(.*?)(?:```|\Z)|<tool_call>(.*?)(?:</tool_call>|\Z)", re.S
)
# A call's object: its name, then its arguments (a file block of package.json, which has
# a "name" too, is no call).
_CALL_LIKE = re.compile(r'^\s*\[?\s*\{\s*"name"\s*:\s*"[^"\n]*"\s*,\s*"(?:arguments|parameters)"')
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "id", "type"})


def described(tools: list[dict[str, Any]]) -> str:
    """The tools as the system message says them: one line a function, one an argument
    (a small model reads about 30 tokens a second on two cores, and a JSON schema says
    the same in twice the tokens), then how to call one."""
    lines = [INTRO]
    for tool in tools:
        function = tool.get("function", tool)
        parameters = function.get("parameters") or {}
        properties: dict[str, Any] = parameters.get("properties") or {}
        required = set(parameters.get("required") or ())
        arguments = ", ".join(n + ("" if n in required else "?") for n in properties)
        lines.append(f"- {function['name']}({arguments}): {function.get('description', '')}")
        lines += [
            f"    {name}: {spec['description']}"
            for name, spec in properties.items()
            if isinstance(spec, dict) and spec.get("description")
        ]
    return "\n".join(lines) + HOW


def as_text(messages: list[Message], tools: list[dict[str, Any]]) -> list[Message]:
    """The conversation for a server sent no tools: the tools in the system message,
    each earlier call a fenced block in its assistant message, and the results that
    answered them one user message of `<tool_response>` blocks."""
    said: list[Message] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            response = f"<tool_response>\n{message.get('content') or ''}\n</tool_response>"
            if said and said[-1].get("role") == "user" and said[-1].get("responses"):
                said[-1]["content"] += "\n" + response
            else:
                said.append({"role": "user", "content": response, "responses": True})
        elif role == "assistant" and message.get("tool_calls"):
            blocks = [_block(call) for call in message["tool_calls"]]
            text = "\n".join(filter(None, [message.get("content") or "", *blocks]))
            said.append({"role": "assistant", "content": text})
        else:
            said.append(dict(message))
    if not said or said[0].get("role") != "system":
        said.insert(0, {"role": "system", "content": DEFAULT_SYSTEM})
    said[0]["content"] = f"{said[0].get('content') or ''}{described(tools)}"
    return [{k: v for k, v in m.items() if k != "responses"} for m in said]


def _block(call: dict[str, Any]) -> str:
    function = call.get("function", call)
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return f'```json\n{{"name": "{function.get("name", "")}", "arguments": {arguments}}}\n```'


def read_calls(turn: AssistantTurn, opening: str = "") -> AssistantTurn:
    """The reply with the calls its text writes out as tool calls, and its text less
    them; `opening`: what the reply was begun with for the model (a call's opening,
    which the server leaves out of what it sends back)."""
    text = opening + turn.text if opening and not turn.text.startswith(opening) else turn.text
    calls, broken, spans = [], [], []
    for match in _BLOCK.finditer(text):
        body = (match.group(1) if match.group(1) is not None else match.group(2)) or ""
        if not _CALL_LIKE.match(body):
            continue  # a code block in an answer
        spans.append(match.span())
        found, bad = _objects(body)
        calls += found
        broken += bad
    if not spans and _CALL_LIKE.match(text.strip()):  # one call, no fence
        spans.append((0, len(text)))
        calls, broken = _objects(text)
    if broken and not calls:
        raise ModelError(
            "malformed_output", f"the reply's call is not valid JSON: {broken[0][:200]}"
        )
    if not calls:
        return turn
    left, at = [], 0
    for start, end in spans:
        left.append(text[at:start])
        at = end
    left.append(text[at:])
    made = tuple(
        ToolCall(id=f"call_{uuid.uuid4().hex[:24]}", name=name, arguments=arguments)
        for name, arguments in calls
    )
    return AssistantTurn(
        text="".join(left).strip(),
        tool_calls=made,
        usage=turn.usage,
        finish_reason="tool_calls" if turn.finish_reason == "stop" else turn.finish_reason,
        attempt=turn.attempt,
        model=turn.model,
    )


def _objects(body: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The calls in a block's text, as (name, arguments as JSON text), and the parts that
    read as calls but do not parse: one object, a list of them, or one object a line."""
    try:
        value = json.loads(body)
    except ValueError:
        values: list[Any] = []
        broken = []
        decoder, at = json.JSONDecoder(), 0
        while (start := body.find("{", at)) >= 0:
            try:
                value, at = decoder.raw_decode(body, start)
            except ValueError:
                broken.append(body[start:].strip())
                break
            values.append(value)
        return _as_calls(values), broken
    return _as_calls(value if isinstance(value, list) else [value]), []


def _as_calls(values: list[Any]) -> list[tuple[str, str]]:
    calls = []
    for value in values:
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            continue
        if not value.keys() <= _CALL_KEYS:
            continue  # data with a "name", not a call
        arguments = value.get("arguments", value.get("parameters", {}))
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        calls.append((value["name"], text))
    return calls


def read_reply(turn: AssistantTurn, opening: str, shown: TextSink | None) -> AssistantTurn:
    """`read_calls`, and what `shown` held back of the reply's text shown where it
    turned out to call nothing."""
    read = read_calls(turn, opening)
    if not read.tool_calls and isinstance(shown, HeldBack):
        shown.rest()
    return read


class HeldBack:
    """Streamed text up to where a written call begins: the user sees the model's words,
    not its calls' JSON. `rest` gives what was held when the reply had no call."""

    def __init__(self, sink: TextSink) -> None:
        self.sink = sink
        self.shown = ""
        self.held = ""
        self.stopped = False

    def __call__(self, text: str) -> None:
        if self.stopped:
            self.held += text
            return
        pending = self.held + text
        cut = min((i for o in OPENINGS if (i := pending.find(o)) >= 0), default=-1)
        if cut >= 0:
            self._show(pending[:cut])
            self.held, self.stopped = pending[cut:], True
            return
        keep = max(
            (n for o in OPENINGS for n in range(1, len(o)) if pending.endswith(o[:n])), default=0
        )
        self._show(pending[: len(pending) - keep])
        self.held = pending[len(pending) - keep :]

    def rest(self) -> None:
        """The text held back, shown: the reply turned out to call nothing."""
        self._show(self.held)
        self.held = ""

    def _show(self, text: str) -> None:
        if text:
            self.shown += text
            self.sink(text)
