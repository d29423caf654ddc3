"""What a tool is: one object with its name, documentation, argument model and function."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from workers.facts import Facts

# One tool result may take at most an eighth of the model's context window: the system
# prompt, the conversation so far, the other results of a batch and the reply must all
# fit beside it, and masking starts at half the window.
RESULT_SHARE = 1 / 8
# Code and logs run 3 to 4 characters a token; 3 errs on the side of fitting.
CHARS_PER_TOKEN = 3


def result_chars(window_tokens: int) -> int:
    """The most characters one tool result may have for a model with this window."""
    return int(window_tokens * RESULT_SHARE * CHARS_PER_TOKEN)


class Args(BaseModel):
    """Base of every tool's arguments: unknown arguments are refused, not ignored."""

    model_config = ConfigDict(extra="forbid")


class ExtensionArgs(BaseModel):
    """Arguments checked against a JSON schema given as data, not by pydantic."""

    model_config = ConfigDict(extra="allow")


class ToolError(Exception):
    """An error the model can fix (file not found, edit matched twice): becomes `is_error`."""


@dataclass(frozen=True)
class ToolResult:
    output: str
    """What the model reads."""
    summary: str = ""
    """One line for the terminal: `replaced 1 match`, `exit 0 in 1.2s`."""
    is_error: bool = False
    facts: Facts = field(default_factory=Facts)
    """What the harness learns from the call (paths written, exit codes), never from the model."""
    parts: tuple[str, ...] = ()
    """A delegation's reports, one per worker and each whole (one for a single worker).
    A batch's are joined after the first line of `output`: when the whole is too long for
    the model, each is cut to its share there, so no worker's report is lost."""


Approver = Callable[[str, str], bool]
"""Asked (command, why it needs approval) before a host command outside the allowlist."""


def deny_all(_command: str, _reason: str) -> bool:
    return False


@dataclass
class ToolContext:
    workspace: Path
    approve: Approver = deny_all
    guard_shell: bool = True
    """On the host, commands pass the policy or the approver; in a container, the
    container is the brake and every command runs."""
    deadline: float | None = None
    """time.monotonic() past which the agent's wall clock is spent; caps shell timeouts."""
    cancelled: Callable[[], bool] = lambda: False
    """True once the agent is cancelled: a running command is killed."""
    max_output_chars: int | None = None
    """The most a result may hold for this agent's model (`result_chars`); each tool
    keeps the most useful part within it. None: each tool's own maximum."""

    output_dir: Path | None = None
    """Where a command's whole output is saved when too long to show (in a container, a
    folder of its own); None: the workspace's state folder (workers/tools/outputs.py)."""

    def output_cap(self, own_max: int) -> int:
        return own_max if self.max_output_chars is None else min(own_max, self.max_output_chars)


A = TypeVar("A", bound=Args)


ToolKind = Literal["sandboxed", "harness", "extension"]
"""Where a tool runs:
- "sandboxed": in the agent's sandbox (on the host confined to the workspace, or in its
  container): every built-in tool;
- "harness": in gaffer itself, touching no workspace file (delegate, use_skill);
- "extension": in gaffer's own process on the host (a plugin's or an MCP server's), so
  never granted to an agent whose tools run in a container."""


@dataclass(frozen=True)
class Tool(Generic[A]):
    name: str
    description: str
    args: type[A]
    run: Callable[[ToolContext, A], ToolResult]
    read_only: bool
    begin: Callable[[A], Callable[[], ToolResult] | None] | None = None
    """For a call that may run while the later calls of its batch start too (delegating
    to a parallel-safe worker): starts it and returns what waits for its result, or
    None to run it in order. Other calls run one after another, in order."""
    parameters: dict[str, Any] | None = None
    """A JSON schema given as data (plugins, MCP) instead of generated from `args`."""
    kind: ToolKind = "sandboxed"
    """Where it runs, the one thing that decides it (workers/executor.py,
    workers/assembly/specs.py)."""
    origin: str = "built-in"
    """Where the tool comes from, for people: built-in, harness, plugin <path>, mcp <server>."""

    def schema(self) -> dict[str, Any]:
        """The tool as the Chat Completions `tools` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters or _plain_schema(self.args.model_json_schema()),
            },
        }

    def label(self, arguments: dict[str, Any]) -> str:
        """The argument a person wants to see in a one-line view of the call."""
        tasks = arguments.get("tasks")
        if isinstance(tasks, list) and tasks and all(isinstance(t, str) for t in tasks):
            arguments = {"task": f"{len(tasks)} tasks: {tasks[0]}"}  # a fan-out, and its first
        for key in ("command", "pattern", "path", "task", "name", "content"):
            value = arguments.get(key)
            if isinstance(value, str) and value.strip():
                value = " ".join(value.split())
                return value if len(value) <= 60 else value[:59] + "…"
        return ""


def _plain_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Pydantic's schema minus titles, with `X | None` shown as plain X (optional by omission).

    Small local models follow flat schemas far better than anyOf-with-null.
    """
    properties = {}
    for name, prop in schema.get("properties", {}).items():
        prop = {k: v for k, v in prop.items() if k != "title"}
        options = prop.pop("anyOf", None)
        if options:
            concrete = [o for o in options if o.get("type") != "null"]
            if len(concrete) == 1:
                prop = {**concrete[0], **prop}
            else:
                prop["anyOf"] = options
        if prop.get("default", 0) is None:
            del prop["default"]
        properties[name] = prop
    plain: dict[str, Any] = {"type": "object", "properties": properties}
    if schema.get("required"):
        plain["required"] = schema["required"]
    plain["additionalProperties"] = False
    return plain


# -- what a call that went wrong says, on the host and in the container alike ---------


def error_result(message: str) -> ToolResult:
    """A failed call as the model reads it: `error: …`, its first sentence the summary."""
    first = message.split(". ")[0].split("\n")[0]
    return ToolResult(output=f"error: {message}", summary=first[:80], is_error=True)


def run_checked(tool: Tool[Any], context: ToolContext, arguments: dict[str, Any]) -> ToolResult:
    """Validate the arguments and run the tool; whatever goes wrong is a result, never an
    exception: arguments that do not fit, a ToolError, or a bug in the tool."""
    try:
        args = tool.args.model_validate(arguments)
    except ValidationError as error:
        return invalid_arguments(tool, error)
    try:
        return tool.run(context, args)
    except ToolError as error:
        return error_result(str(error))
    except Exception as error:  # a bug in one tool must not end the run or the server
        return crashed(tool.name, error)


def crashed(name: str, error: Exception) -> ToolResult:
    return error_result(f"{name} failed unexpectedly: {type(error).__name__}: {error}")


def invalid_arguments(tool: Tool[Any], error: ValidationError) -> ToolResult:
    problems = "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in error.errors()
    )
    return error_result(f"invalid arguments for {tool.name}: {problems}. Expected {example(tool)}.")


def example(tool: Tool[Any]) -> str:
    """The arguments a tool takes, as a model should send them."""
    parameters = tool.schema()["function"]["parameters"]
    required = parameters.get("required", [])
    props = parameters["properties"]
    parts = [
        f'"{name}": <{p.get("type", "value")}>' for name, p in props.items() if name in required
    ]
    optional = [name for name in props if name not in required]
    hint = "{" + ", ".join(parts) + "}"
    return hint + (f" (optional: {', '.join(optional)})" if optional else "")
