"""MCP servers: their tools become `mcp__<server>__<tool>`, served by one event-loop thread.

Servers come from `.mcp.json` in the workspace and gaffer's own `~/.config/gaffer/mcp.json`
(the `mcpServers` format other agents use: `command`/`args`/`env` for stdio, `url` for
Streamable HTTP). Each server lives in one task on a background asyncio loop, so the SDK's
context managers open and close in the same task; agents in any thread call in through
`run_coroutine_threadsafe` with a timeout. A server that fails to start is reported and
skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from workers import host_programs
from workers.extensions.plugins import schema_tool
from workers.log.events import Emitter
from workers.log.schema import McpCall
from workers.state import open_append
from workers.tools.base import Tool, ToolError
from workers.tools.workspace import MCP_CONFIG
from workers.trust import Source

DEFAULT_CALL_TIMEOUT_S = 60.0
# A server that cannot list its tools in this long is treated as broken.
STARTUP_TIMEOUT_S = 30.0
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True)
class ServerConfig:
    name: str
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    read_only: bool | None = None
    """gaffer's override of the tools' readOnlyHint: True or False for every tool."""
    timeout: float = DEFAULT_CALL_TIMEOUT_S
    cwd: Path | None = None
    """Where a stdio server runs: for a workspace's `.mcp.json`, the workspace's top, where
    the files on its command line were hashed when it was trusted."""


def read_configs(sources: Iterable[Source], warn: Callable[[str], None]) -> list[ServerConfig]:
    """Servers by name from each config in turn; a later one overrides an earlier one."""
    servers: dict[str, ServerConfig] = {}
    for source in sources:
        path = source.origin
        try:
            data = json.loads(source.data.decode("utf-8"))
            entries = data.get("mcpServers", {})
            if not isinstance(entries, dict):
                raise ValueError("mcpServers must be an object")
        except (ValueError, AttributeError) as error:
            warn(f"MCP config {path} skipped: {error}")
            continue
        for name, entry in entries.items():
            try:
                servers[name] = _server(name, entry, source.path)
            except (TypeError, ValueError) as error:
                warn(f"MCP server {name!r} in {path} skipped: {error}")
    return list(servers.values())


def _server(name: str, entry: Any, config_file: Path | None) -> ServerConfig:
    if not isinstance(entry, dict):
        raise ValueError("its entry must be an object")
    if bool(entry.get("command")) == bool(entry.get("url")):
        raise ValueError("give either command (stdio) or url (Streamable HTTP)")
    read_only = entry.get("readOnly")
    return ServerConfig(
        name=name,
        command=entry.get("command"),
        args=[str(a) for a in entry.get("args", [])],
        env={str(k): str(v) for k, v in (entry.get("env") or {}).items()},
        url=entry.get("url"),
        read_only=read_only if isinstance(read_only, bool) else None,
        timeout=float(entry.get("timeout", DEFAULT_CALL_TIMEOUT_S)),
        # A workspace's server runs at the workspace's top; the user's own outside it.
        cwd=config_file.parent if config_file and config_file.name == MCP_CONFIG else None,
    )


class McpHub:
    """One background event loop holding every server's session."""

    def __init__(self, events: Emitter, log_dir: Path) -> None:
        self.events = events
        self.log_dir = log_dir
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="gaffer-mcp", daemon=True)
        self.thread.start()
        self.sessions: dict[str, Any] = {}
        self._stops: dict[str, asyncio.Event] = {}
        self._tasks: list[Any] = []
        self._stderr: list[TextIO] = []

    def start(
        self, configs: list[ServerConfig], warn: Callable[[str], None]
    ) -> dict[str, Tool[Any]]:
        """Connect to every server at once; the tools of those that answered."""
        pending = []
        for config in configs:
            ready: Any = asyncio.run_coroutine_threadsafe(self._ready_future(), self.loop).result()
            task = asyncio.run_coroutine_threadsafe(self._serve(config, ready), self.loop)
            self._tasks.append(task)
            pending.append((config, ready))
        tools: dict[str, Tool[Any]] = {}
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        for config, ready in pending:
            try:
                listed = asyncio.run_coroutine_threadsafe(
                    asyncio.wait_for(asyncio.shield(ready), max(0.1, deadline - time.monotonic())),
                    self.loop,
                ).result()
            except Exception as error:
                where = f"; its stderr is in {self._errlog(config)}" if config.command else ""
                warn(
                    f"MCP server {config.name!r} skipped: it did not start "
                    f"({_describe(error)}){where}"
                )
                self._stop(config.name)
                continue
            for remote in listed:
                tool = self._tool(config, remote)
                tools[tool.name] = tool
        return tools

    def _errlog(self, config: ServerConfig) -> Path:
        return self.log_dir / f"mcp-{_UNSAFE.sub('_', config.name)}.stderr"

    async def _ready_future(self) -> asyncio.Future[Any]:
        return self.loop.create_future()

    async def _serve(self, config: ServerConfig, ready: asyncio.Future[Any]) -> None:
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client

        stop = self._stops[config.name] = asyncio.Event()
        try:
            async with contextlib.AsyncExitStack() as stack:
                if config.command:
                    self.log_dir.mkdir(parents=True, exist_ok=True)
                    errlog = os.fdopen(open_append(self.log_dir, self._errlog(config).name), "a")
                    self._stderr.append(errlog)
                    # Started by the SDK, but as host_programs starts one: its program
                    # found outside the folder it runs in, only plain variables and
                    # those its config sets (no API key).
                    # A workspace's server runs where its files were hashed; the user's
                    # own from outside the workspace (host_programs), as every program.
                    where = os.fspath(config.cwd or host_programs.FALLBACK_FOLDER)
                    env = host_programs.environment(values=config.env)
                    argv = host_programs.resolved([config.command, *config.args], env, where)
                    params = StdioServerParameters(
                        command=argv[0], args=argv[1:], env=env, cwd=where
                    )
                    read, write = await stack.enter_async_context(
                        stdio_client(params, errlog=errlog)
                    )
                else:
                    read, write = await stack.enter_async_context(
                        streamable_http_client(str(config.url))
                    )
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                listing = await session.list_tools()
                self.sessions[config.name] = session
                ready.set_result(listing.tools)
                await stop.wait()
        except BaseException as error:
            if not ready.done():
                ready.set_exception(
                    error if isinstance(error, Exception) else RuntimeError(str(error))
                )
        finally:
            self.sessions.pop(config.name, None)

    def _tool(self, config: ServerConfig, remote: Any) -> Tool[Any]:
        name = f"mcp__{_UNSAFE.sub('_', config.name)}__{_UNSAFE.sub('_', remote.name)}"[:64]
        hint = getattr(remote.annotations, "read_only_hint", None) if remote.annotations else None
        read_only = config.read_only if config.read_only is not None else bool(hint)
        schema = remote.input_schema or {"type": "object", "properties": {}}

        def call(arguments: dict[str, Any]) -> str:
            return self.call(config, remote.name, arguments)

        return schema_tool(
            name=name,
            description=(
                remote.description or f"{remote.name} from the MCP server {config.name}"
            ).strip(),
            parameters=schema,
            call=call,
            read_only=read_only,
            origin=f"mcp {config.name}",
        )

    def call(self, config: ServerConfig, tool: str, arguments: dict[str, Any]) -> str:
        """Call from any thread; the answer's text, or ToolError with the server's message."""
        session = self.sessions.get(config.name)
        if session is None:
            raise ToolError(f"the MCP server {config.name!r} is not running")
        started = time.monotonic()
        future = asyncio.run_coroutine_threadsafe(session.call_tool(tool, arguments), self.loop)
        is_error, text = True, ""
        try:
            result = future.result(timeout=config.timeout)
            is_error = bool(result.is_error)
            text = _text(result.content)
        except TimeoutError as error:
            future.cancel()
            text = (
                f"the MCP server {config.name!r} did not answer {tool} within {config.timeout:g}s"
            )
            raise ToolError(text) from error
        except Exception as error:
            text = f"the MCP server {config.name!r} failed on {tool}: {_describe(error)}"
            raise ToolError(text) from error
        finally:
            self.events.emit(
                McpCall(
                    server=config.name,
                    tool=tool,
                    args=arguments,
                    is_error=is_error,
                    elapsed_s=round(time.monotonic() - started, 4),
                    result_preview=text[:200],
                )
            )
        if is_error:
            raise ToolError(text or f"{tool} reported an error")
        return text

    def _stop(self, name: str) -> None:
        stop = self._stops.get(name)
        if stop is not None:
            self.loop.call_soon_threadsafe(stop.set)

    def close(self) -> None:
        """Stop every server (their processes end with their sessions) and the loop."""
        for name in list(self._stops):
            self._stop(name)
        for task in self._tasks:
            with contextlib.suppress(Exception):
                task.result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        for errlog in self._stderr:
            errlog.close()


def _text(content: list[Any]) -> str:
    parts = []
    for block in content:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]")
    return "\n".join(parts)


def _describe(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text}"[:300]
