"""A real MCP server for the tests, written with the mcp package's own server API."""

from __future__ import annotations

import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

app = MCPServer("calc")


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def slow_echo(text: str, seconds: float = 0.3) -> str:
    """Echo text after a pause."""
    time.sleep(seconds)
    return text


@app.tool()
def write_note(note: str) -> str:
    """Pretend to store a note (not read-only)."""
    return f"stored: {note}"


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        app.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
