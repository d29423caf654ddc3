"""From a raw tool call to a result: parse, validate, run in the sandbox, never raise for
the model's mistakes."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from workers.limits import Budget
from workers.model import ToolCall
from workers.sandbox import Sandbox, SandboxFault
from workers.tools.base import (
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    crashed,
    error_result,
    example,
    invalid_arguments,
    run_checked,
)
from workers.tools.workspace import shown_name


def parse_arguments(raw: str) -> dict[str, Any] | str:
    """The arguments as a dict, or the reason they are not one."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as error:
        return f"not valid JSON ({error.msg} at character {error.pos})"
    if not isinstance(value, dict):
        return f"a JSON {type(value).__name__}, not an object"
    return value


def execute(
    call: ToolCall,
    arguments: dict[str, Any] | str,
    tools: dict[str, Tool[Any]],
    sandbox: Sandbox,
    budget: Budget,
    output_chars: int | None = None,
) -> ToolResult:
    """Run one call whose arguments `parse_arguments` already read (or why it could not);
    its result within `output_chars` (the model's share for one result), whatever the tool."""
    return fit(_execute(call, arguments, tools, sandbox, budget, output_chars), output_chars)


def fit(result: ToolResult, output_chars: int | None) -> ToolResult:
    """A result no longer than `output_chars`: tools cut their own output usefully; this
    catches the rest (plugins, MCP servers, worker reports) by keeping head and tail."""
    if (shown := shown_name(result.output)) != result.output:
        result = dataclasses.replace(result, output=shown, summary=shown_name(result.summary))
    text = result.output
    if output_chars is None or len(text) <= output_chars:
        return result
    if len(result.parts) > 1:
        first = text.split("\n\n", 1)[0]
        share = max(0, (output_chars - len(first)) // len(result.parts) - 2)
        cut = [_head_and_tail(shown_name(part), share) for part in result.parts]
        return dataclasses.replace(result, output="\n\n".join([first, *cut]))
    return dataclasses.replace(result, output=_head_and_tail(text, output_chars))


def _head_and_tail(text: str, output_chars: int) -> str:
    if len(text) <= output_chars:
        return text
    note = (
        f"\n[... {len(text) - output_chars} characters cut so the result fits the model's "
        "context; ask for less, or for a part ...]\n"
    )
    keep = max(0, output_chars - len(note))
    head = keep * 2 // 3
    return text[:head] + note + text[len(text) - (keep - head) :]


_FILE_NAME = re.compile(r"[\w./-]*\w\.\w{1,5}|[\w.-]+/[\w./-]+")


def _unknown(name: str, tools: dict[str, Tool[Any]]) -> str:
    """Why a call to no tool was not run, and the call meant where its name is a file's
    (the bundled model checks a first answer's lines by calling `core.py`, one a line)."""
    said = f"unknown tool {name!r}. The tools you can call are: {', '.join(tools) or 'none'}."
    if "read_file" in tools and _FILE_NAME.fullmatch(name):
        meant = json.dumps({"name": "read_file", "arguments": {"path": name}})
        said += f" {name!r} is a file's name, not a tool's: to read it, call {meant}."
    return said


def as_meant(
    call: ToolCall, arguments: dict[str, Any] | str, tools: dict[str, Tool[Any]]
) -> tuple[ToolCall, str] | None:
    """A call named after a file with only a name to find (`core.py` with {"name":
    "Context"}: the bundled model, shown a find_symbol call to check a first answer's
    line, put each line's file where the tool goes) as the find_symbol call it means,
    with a line saying so; None for any other call."""
    if call.name in tools or "find_symbol" not in tools or not _FILE_NAME.fullmatch(call.name):
        return None
    if not (isinstance(arguments, dict) and list(arguments) == ["name"]):
        return None
    if not isinstance(arguments["name"], str):
        return None
    meant = json.dumps({"name": "find_symbol", "arguments": arguments})
    said = f"[{call.name!r} is a file's name, not a tool's: taken as {meant}]\n"
    return dataclasses.replace(call, name="find_symbol"), said


def _execute(
    call: ToolCall,
    arguments: dict[str, Any] | str,
    tools: dict[str, Tool[Any]],
    sandbox: Sandbox,
    budget: Budget,
    output_chars: int | None,
) -> ToolResult:
    tool = tools.get(call.name)
    if tool is None:
        return error_result(_unknown(call.name, tools))
    if isinstance(arguments, str):
        return error_result(
            f"the arguments for {call.name} are {arguments}. Send one JSON object, e.g. "
            f"{example(tool)}."
        )
    if tool.kind == "harness":
        context = ToolContext(
            Path.cwd(),
            deadline=budget.deadline_at(),
            cancelled=budget.cancelled,
            max_output_chars=output_chars,
        )
        return run_checked(tool, context, arguments)
    try:
        args = tool.args.model_validate(arguments)
    except ValidationError as error:
        return invalid_arguments(tool, error)
    # The sandbox runs the tool where it belongs; in a container, the tool server there
    # turns failures into results in the same words (run_checked).
    try:
        return sandbox.run(tool, args, budget, output_chars)
    except ToolError as error:
        return error_result(str(error))
    except SandboxFault:
        raise
    except Exception as error:  # a bug in one tool must not end the run
        return crashed(call.name, error)
