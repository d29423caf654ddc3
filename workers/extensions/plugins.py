"""Plugins: a Python file defining TOOL_DEF and run(**args) becomes a tool.

A broken plugin (syntax error, missing names, an exception or `sys.exit` at import, a
clashing name) is skipped with a one-line warning; gaffer goes on. A plugin's call that
raises or exits is that call's error, never the run's end.
"""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

from workers.tools.base import ExtensionArgs, Tool, ToolContext, ToolError, ToolResult
from workers.trust import Source

_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]{0,63}$")


def load_plugins(
    sources: Iterable[Source], taken: set[str], warn: Callable[[str], None]
) -> dict[str, Tool[Any]]:
    tools: dict[str, Tool[Any]] = {}
    for source in sources:
        try:
            tool = _load(source)
        except SystemExit as error:  # someone else's file does not decide when gaffer ends
            warn(f"plugin {source.origin} skipped: it called sys.exit({error.code!r}) at import")
            continue
        except Exception as error:  # any failure in someone else's file is theirs, not ours
            warn(f"plugin {source.origin} skipped: {type(error).__name__}: {error}")
            continue
        if tool.name in taken or tool.name in tools:
            warn(f"plugin {source.origin} skipped: the name {tool.name!r} is already taken")
            continue
        tools[tool.name] = tool
    return tools


def _load(source: Source) -> Tool[Any]:
    """Run the plugin's code: exactly the bytes that were read (and trusted), not the file
    as it may be by now."""
    module_name = f"gaffer_plugin_{abs(hash(source.origin))}"
    module = types.ModuleType(module_name)
    module.__file__ = str(source.path or source.origin)
    code = compile(source.data, str(source.path or source.origin), "exec")
    sys.modules[module_name] = module
    try:
        exec(code, module.__dict__)
    finally:
        sys.modules.pop(module_name, None)
    definition = getattr(module, "TOOL_DEF", None)
    run = getattr(module, "run", None)
    if not isinstance(definition, dict):
        raise ValueError("it defines no TOOL_DEF dict")
    if not callable(run):
        raise ValueError("it defines no run(**args) function")
    name, description = definition.get("name"), definition.get("description")
    parameters = definition.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"TOOL_DEF name {name!r} must be letters, digits, _ or -")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("TOOL_DEF needs a description")
    import jsonschema  # a tenth of a second, paid only where a plugin or MCP server is

    jsonschema.Draft202012Validator.check_schema(parameters)
    return schema_tool(
        name=name,
        description=description,
        parameters=parameters,
        call=_isolated(run),
        read_only=bool(definition.get("read_only", False)),
        origin=f"plugin {source.origin}",
    )


def _isolated(run: Callable[..., Any]) -> Callable[[dict[str, Any]], str]:
    def call(arguments: dict[str, Any]) -> str:
        try:
            return str(run(**arguments))
        except SystemExit as error:
            raise ToolError(
                f"the plugin called sys.exit({error.code!r}); nothing else ran"
            ) from None

    return call


def schema_tool(
    *,
    name: str,
    description: str,
    parameters: dict[str, Any],
    call: Callable[[dict[str, Any]], str],
    read_only: bool,
    origin: str,
) -> Tool[Any]:
    """A tool whose arguments are checked against a JSON schema given as data."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(parameters)

    def run(_ctx: ToolContext, args: ExtensionArgs) -> ToolResult:
        arguments = args.model_dump()
        problems = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
        if problems:
            where = ".".join(map(str, problems[0].path)) or "arguments"
            raise ToolError(f"invalid arguments for {name}: {where}: {problems[0].message}")
        output = call(arguments)
        first = output.strip().splitlines()[0] if output.strip() else "done"
        return ToolResult(output=output, summary=first[:80])

    return Tool(
        name=name,
        description=description,
        args=ExtensionArgs,
        run=run,
        read_only=read_only,
        parameters=parameters,
        kind="extension",
        origin=origin,
    )
