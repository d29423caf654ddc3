"""From a raw tool call to a result: parse, validate, run in the sandbox, never raise for
the model's mistakes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from workers.limits import Budget
from workers.model import ToolCall
from workers.sandbox import Sandbox, SandboxFault
from workers.tools.base import Tool, ToolContext, ToolError, ToolResult


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
    text = result.output
    if output_chars is None or len(text) <= output_chars:
        return result
    note = (
        f"\n[... {len(text) - output_chars} characters cut so the result fits the model's "
        "context; ask for less, or for a part ...]\n"
    )
    keep = max(0, output_chars - len(note))
    head = keep * 2 // 3
    return dataclasses.replace(
        result, output=text[:head] + note + text[len(text) - (keep - head) :]
    )


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
        return _error(
            f"unknown tool {call.name!r}. The tools you can call are: {', '.join(tools) or 'none'}."
        )
    if isinstance(arguments, str):
        return _error(
            f"the arguments for {call.name} are {arguments}. Send one JSON object, e.g. "
            f"{_example(tool)}."
        )
    try:
        args = tool.args.model_validate(arguments)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in error.errors()
        )
        return _error(f"invalid arguments for {call.name}: {problems}. Expected {_example(tool)}.")
    try:
        if tool.harness:
            context = ToolContext(
                Path.cwd(),
                deadline=budget.deadline_at(),
                cancelled=budget.cancelled,
                max_output_chars=output_chars,
            )
            return tool.run(context, args)
        return sandbox.run(tool, args, budget, output_chars)
    except ToolError as error:
        return _error(str(error))
    except SandboxFault:
        raise
    except Exception as error:  # a bug in one tool must not end the run
        return _error(f"{call.name} failed unexpectedly: {type(error).__name__}: {error}")


def _error(message: str) -> ToolResult:
    first = message.split(". ")[0].split("\n")[0]
    return ToolResult(output=f"error: {message}", summary=first[:80], is_error=True)


def _example(tool: Tool[Any]) -> str:
    props = tool.schema()["function"]["parameters"]["properties"]
    required = tool.schema()["function"]["parameters"].get("required", [])
    parts = [
        f'"{name}": <{p.get("type", "value")}>' for name, p in props.items() if name in required
    ]
    optional = [name for name in props if name not in required]
    hint = "{" + ", ".join(parts) + "}"
    return hint + (f" (optional: {', '.join(optional)})" if optional else "")
