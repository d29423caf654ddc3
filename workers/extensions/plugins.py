"""Plugins: a Python file defining TOOL_DEF and run(**args) becomes a tool.

A broken plugin (syntax error, missing names, an exception at import, a clashing name)
is skipped with a one-line warning; gaffer goes on.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import jsonschema

from workers.tools.base import ExtensionArgs, Tool, ToolContext, ToolError, ToolResult

_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]{0,63}$")


def load_plugins(
    folders: Iterable[Path], taken: set[str], warn: Callable[[str], None]
) -> dict[str, Tool[Any]]:
    tools: dict[str, Tool[Any]] = {}
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.py")):
            try:
                tool = _load(path)
            except Exception as error:  # any failure in someone else's file is theirs, not ours
                warn(f"plugin {path} skipped: {type(error).__name__}: {error}")
                continue
            if tool.name in taken or tool.name in tools:
                warn(f"plugin {path} skipped: the name {tool.name!r} is already taken")
                continue
            tools[tool.name] = tool
    return tools


def _load(path: Path) -> Tool[Any]:
    module_name = f"gaffer_plugin_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError("not a loadable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
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
    jsonschema.Draft202012Validator.check_schema(parameters)
    return schema_tool(
        name=name,
        description=description,
        parameters=parameters,
        call=lambda arguments: str(run(**arguments)),
        read_only=bool(definition.get("read_only", False)),
        origin=f"plugin {path}",
    )


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
        origin=origin,
    )
