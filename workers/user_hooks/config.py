"""Hooks as written in a config file: `[[hooks.post_tool]]` tables, each a command and
what it is for, read with the file it came from."""

from __future__ import annotations

import fnmatch
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

Moment = Literal[
    "pre_tool",
    "post_tool",
    "user_prompt",
    "agent_start",
    "agent_end",
    "session_end",
    "notification",
]
MOMENTS: tuple[Moment, ...] = typing.get_args(Moment)
DEFAULT_TIMEOUT_S = 30.0
MAX_TIMEOUT_S = 600.0
HOOK_KEYS = {"command", "tools", "timeout", "env", "in_sandbox"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class HookError(ValueError):
    """A hook that cannot be read: said with where it is."""


@dataclass(frozen=True)
class Hook:
    moment: Moment
    command: str
    """Run by bash, with the moment's JSON on stdin."""
    source: str
    """The config file it came from."""
    tools: tuple[str, ...] = ()
    """For pre_tool and post_tool: the tools (names or globs) it is for; () all."""
    timeout: float = DEFAULT_TIMEOUT_S
    env: tuple[str, ...] = ()
    """Variables of gaffer's own environment it is given (nothing else but PATH, HOME,
    the locale and the terminal): a secret reaches a hook only if it names it."""
    in_sandbox: bool = False
    """post_tool: run where the tool ran (a worker's container), not on this machine."""

    def is_for(self, tool: str) -> bool:
        return not self.tools or any(fnmatch.fnmatchcase(tool, t) for t in self.tools)

    @property
    def name(self) -> str:
        return f"{self.moment} hook in {self.source}"


@dataclass
class HookSet:
    hooks: list[Hook] = field(default_factory=list)

    def add(self, table: Any, source: str) -> None:
        """The `[hooks]` table of one config file."""
        if not isinstance(table, dict):
            raise HookError(f"{source}: hooks must be a table of [[hooks.MOMENT]] entries")
        for moment, entries in table.items():
            if moment not in MOMENTS:
                raise HookError(
                    f"{source}: no hook moment {moment!r}; the moments are {', '.join(MOMENTS)}"
                )
            for entry in entries if isinstance(entries, list) else [entries]:
                self.hooks.append(_hook(moment, entry, source))

    def at(self, moment: Moment, tool: str | None = None) -> list[Hook]:
        return [h for h in self.hooks if h.moment == moment and (tool is None or h.is_for(tool))]

    def __bool__(self) -> bool:
        return bool(self.hooks)


def _hook(moment: Moment, entry: Any, source: str) -> Hook:
    where = f"{source}: hooks.{moment}"
    if not isinstance(entry, dict):
        raise HookError(f"{where}: each hook is a table with a `command`")
    if unknown := sorted(set(entry) - HOOK_KEYS):
        raise HookError(
            f"{where}: unknown key {unknown[0]!r}; a hook has {', '.join(sorted(HOOK_KEYS))}"
        )
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        raise HookError(f"{where}: `command` must be a non-empty string (run by bash)")
    tools = entry.get("tools", [])
    if isinstance(tools, str):
        tools = [tools]
    if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
        raise HookError(f"{where}: `tools` must be a list of tool names or globs")
    if tools and moment not in ("pre_tool", "post_tool"):
        raise HookError(f"{where}: `tools` is for pre_tool and post_tool hooks")
    timeout = entry.get("timeout", DEFAULT_TIMEOUT_S)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout <= MAX_TIMEOUT_S
    ):
        raise HookError(
            f"{where}: `timeout` must be seconds, more than 0 and at most {MAX_TIMEOUT_S:g}"
        )
    env = entry.get("env", [])
    if not isinstance(env, list) or not all(isinstance(n, str) and _NAME.fullmatch(n) for n in env):
        raise HookError(f"{where}: `env` must be a list of variable names")
    in_sandbox = entry.get("in_sandbox", False)
    if not isinstance(in_sandbox, bool) or (in_sandbox and moment != "post_tool"):
        raise HookError(f"{where}: `in_sandbox` is true or false, and only for post_tool hooks")
    return Hook(moment, command, source, tuple(tools), float(timeout), tuple(env), in_sandbox)
