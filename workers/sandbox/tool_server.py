"""The tool server: runs inside the sandbox container and answers tool calls over stdio.

It runs the same tool code as the host, so confinement is checked where the files are:
a symlink in the workspace resolves inside the container, never on the host. One JSON
object per line each way:

    → {"id": 1, "tool": "read_file", "args": {...}, "seconds": 118.5, "max_output_chars": 6144}
    ← {"id": 1, "output": "...", "summary": "...", "is_error": false, "facts": {...}}
    → {"cancel": true}   (while a call runs: kill its command, answer as soon as it stops)

The first line it writes is {"ready": true, ...}, so the host knows it started.

The channel is private: before anything runs, the server moves its stdin and stdout to
descriptors no child inherits, puts /dev/null in their place, and makes itself
non-dumpable, so the commands it runs (same uid, no capabilities) can neither inherit
the channel nor open it through /proc/<pid>/fd. If that fails, it does not serve.
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

from workers.tools import BUILTIN_TOOLS, outputs
from workers.tools.base import ToolContext, error_result, run_checked


def allow_all(_command: str, _reason: str) -> bool:
    return True  # the container is the brake: no prompts in here


def handle(request: dict[str, Any], workspace: Path, cancel: threading.Event) -> dict[str, Any]:
    reply: dict[str, Any] = {"id": request.get("id")}
    tool = BUILTIN_TOOLS.get(str(request.get("tool")))
    if tool is None:
        unknown = error_result(f"unknown tool {request.get('tool')!r}")
        return {**reply, "output": unknown.output, "summary": unknown.summary, "is_error": True}
    seconds = request.get("seconds")
    context = ToolContext(
        workspace,
        approve=allow_all,
        guard_shell=False,
        deadline=time.monotonic() + float(seconds) if seconds is not None else None,
        cancelled=cancel.is_set,
        max_output_chars=cap if isinstance(cap := request.get("max_output_chars"), int) else None,
        output_dir=outputs.CONTAINER_FOLDER,
    )
    arguments = request.get("args")
    result = run_checked(tool, context, arguments if isinstance(arguments, dict) else {})
    return {
        **reply,
        "output": result.output,
        "summary": result.summary,
        "is_error": result.is_error,
        "facts": result.facts.as_json(),
    }


PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3


def private_channel() -> tuple[BinaryIO, BinaryIO]:
    """The request and reply streams, out of every child's and every other process's reach."""
    channel_in = os.fdopen(os.dup(0), "rb")  # os.dup makes non-inheritable descriptors
    channel_out = os.fdopen(os.dup(1), "wb")
    errors = os.fdopen(os.dup(2), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    sys.stdin = io.TextIOWrapper(io.BytesIO())
    sys.stdout = io.TextIOWrapper(io.BytesIO())
    sys.stderr = io.TextIOWrapper(errors, write_through=True)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 or libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0):
        raise SystemExit(f"cannot make the tool server non-dumpable (errno {ctypes.get_errno()})")
    return channel_in, channel_out


def serve(workspace: Path, channel_in: BinaryIO, channel_out: BinaryIO) -> None:
    # Our own import path must not leak into the commands the agent runs.
    os.environ.pop("PYTHONPATH", None)
    requests: queue.Queue[dict[str, Any] | None] = queue.Queue()
    cancel = threading.Event()

    def read() -> None:
        for line in channel_in:
            if not line.strip():
                continue
            message = json.loads(line)
            if message.get("cancel"):
                cancel.set()
            else:
                requests.put(message)
        requests.put(None)

    def send(message: dict[str, Any]) -> None:
        channel_out.write(json.dumps(message).encode() + b"\n")
        channel_out.flush()

    threading.Thread(target=read, daemon=True).start()
    send({"ready": True, "uid": os.getuid(), "pid": os.getpid()})
    while (request := requests.get()) is not None:
        cancel.clear()
        send(handle(request, workspace, cancel))


def main() -> None:
    channel_in, channel_out = private_channel()
    serve(Path(sys.argv[1] if len(sys.argv) > 1 else "/workspace"), channel_in, channel_out)


if __name__ == "__main__":
    main()
