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

import dataclasses
import json
import re
import uuid
from typing import Any

from workers.model import AssistantTurn, Message, ModelError, TextSink, ToolCall
from workers.model.replies import Echo

INTRO = "\n\n# Tools\n\nYou can call these functions (? marks an optional argument):"
HOW = (
    "\n\nTo call a function, reply with one fenced JSON block per call, and nothing "
    'after them:\n```json\n{"name": "<function-name>", "arguments": {<arguments>}}\n```\n'
    "Calls that do not depend on each other go in the same reply, one block after "
    "another. When you have the answer, reply in plain text with no JSON block."
)
DEFAULT_SYSTEM = "You are a helpful coding assistant."
# Where a written call's text begins, for the stream (a block, a tag, a bare object).
OPENINGS = ("```", "<tool_call>", '{"name"')
# Where a block or a tag opens, or a line that is a bare call object.
_OPENING = re.compile(r"```[\w.+-]*[ \t]*\n?|<tool_call>\s*|^(?=\s*\[?\s*\{\s*\"name\")", re.M)
_CLOSING = re.compile(r"\s*(?:```|</tool_call>)?")
# A call's object: its name, then its arguments (a file block of package.json, which has
# a "name" too, is no call).
_CALL_LIKE = re.compile(
    r'\s*\[?\s*\{\s*"name"\s*:\s*"(?:[^"\\\n]|\\.)*"\s*,\s*"(?:arguments|parameters)"'
)
_DECODER = json.JSONDecoder()


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
    name = json.dumps(str(function.get("name", "")))  # a model's own name may hold a quote
    return f'```json\n{{"name": {name}, "arguments": {arguments}}}\n```'


def read_calls(turn: AssistantTurn, opening: str = "") -> AssistantTurn:
    """The reply with the calls its text writes out as tool calls, and its text less
    them; `opening`: what the reply was begun with for the model (a call's opening,
    which the server leaves out of what it sends back)."""
    text = opening + turn.text if opening and not turn.text.startswith(opening) else turn.text
    calls: list[tuple[str, str]] = []
    broken: list[str] = []
    spans: list[tuple[int, int]] = []
    at = 0
    while (found := _OPENING.search(text, at)) is not None:
        body = found.end()
        if not _CALL_LIKE.match(text, body):
            at = _past(text, found)  # a code block in an answer, whole
            continue
        end = _objects(text, body, calls, broken)
        end = _CLOSING.match(text, end).end()  # type: ignore[union-attr]
        spans.append((found.start(), end))
        at = end
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
    return dataclasses.replace(
        turn,
        text="".join(left).strip(),
        tool_calls=turn.tool_calls + made,
        finish_reason="tool_calls" if turn.finish_reason == "stop" else turn.finish_reason,
    )


def _past(text: str, opening: re.Match[str]) -> int:
    """Where the block an opening begins ends, when it holds no call: after its closing
    fence (its code may hold what reads as a call's opening)."""
    if not opening.group().startswith("```"):
        return max(opening.end(), opening.start() + 1)
    close = text.find("```", opening.end())
    return len(text) if close < 0 else close + 3


def _objects(text: str, at: int, calls: list[tuple[str, str]], broken: list[str]) -> int:
    """The call objects from `at` on, one after another (one a line, or a list), added to
    `calls`; a part that does not parse goes to `broken`, and reading goes on at the next
    line that opens a call. Where they end."""
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        if at >= len(text) or text[at] not in "[{":
            return at
        try:
            value, at = _DECODER.raw_decode(text, at)
        except ValueError:
            following = re.compile(r'\n\s*\{\s*"name"').search(text, at + 1)
            stop = following.start() if following else len(text)
            broken.append(text[at:stop].strip())
            at = stop
            continue
        calls += _as_calls(value if isinstance(value, list) else [value])


def _as_calls(values: list[Any]) -> list[tuple[str, str]]:
    """(name, arguments as JSON text) of each object with a name and arguments; others
    (data with a "name") are no calls. Keys besides those are left out."""
    calls = []
    for value in values:
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            continue
        if "arguments" not in value and "parameters" not in value:
            continue
        arguments = value.get("arguments", value.get("parameters"))
        text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
        calls.append((value["name"], text))
    return calls


def read_reply(turn: AssistantTurn, opening: str, shown: Echo) -> AssistantTurn:
    """`read_calls`, and what `shown` held back of the reply's text shown where it
    turned out to call nothing."""
    read = read_calls(turn, opening)
    if not read.tool_calls and isinstance(shown, HeldBack):
        shown.rest()
    return read


class HeldBack(Echo):
    """Streamed text up to where a written call begins: the user sees the model's words,
    not its calls' JSON. Each try of the call is held back on its own; `rest` shows what
    was held of the last when the reply turned out to call nothing. `in_call`: the reply
    was begun with a call's opening (which the server leaves out), so all of it is held."""

    def __init__(self, sink: TextSink | None, *, in_call: bool = False) -> None:
        super().__init__(sink)
        self._in_call = in_call
        self._held = ""
        self._stopped = in_call

    def restart(self) -> None:
        super().restart()
        self._held, self._stopped = "", self._in_call

    def feed(self, delta: str) -> None:
        if self._stopped:
            self._held += delta
            return
        pending = self._held + delta
        cut = min((i for o in OPENINGS if (i := pending.find(o)) >= 0), default=-1)
        if cut >= 0:
            super().feed(pending[:cut])
            self._held, self._stopped = pending[cut:], True
            return
        # The start of an opening, split across deltas, waits for the rest of it.
        keep = max(
            (n for o in OPENINGS for n in range(1, len(o)) if pending.endswith(o[:n])), default=0
        )
        super().feed(pending[: len(pending) - keep])
        self._held = pending[len(pending) - keep :]

    def rest(self) -> None:
        """The text held back, shown: the reply turned out to call nothing."""
        held, self._held = self._held, ""
        super().feed(held)
