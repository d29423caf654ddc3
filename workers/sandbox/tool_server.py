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

Every process a call started ends before its reply is sent, detached ones (`setsid`,
double fork, `nohup`) included, so nothing of the agent's acts between snapshots: see
end_call.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
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


# How a call's processes end. A PID namespace per call is out of reach: with no
# capabilities, Docker's seccomp profile refuses unshare (checked: `unshare --pid --fork`
# and `unshare --user --pid --fork` both fail with EPERM in the sandbox). So the server
# sends kill(-1, SIGKILL), which reaches every process of its uid in the container but
# itself and PID 1, and nothing outside the container's PID namespace (its own parent,
# `docker exec`'s, is there). The kernel signals them all under one lock and a fork under
# way fails, so a fork loop cannot slip a child past it; the keeper runs as another uid
# (container.KEEPER_UID). /proc then confirms that none is left, and the kill is sent
# again until so.
# Enough for killed processes to finish exiting (freeing a large memory takes a moment);
# past it, the server stops rather than answer with a process of the call still alive.
END_WAIT_S = 5.0
# Between checks of /proc while they exit.
END_PAUSE_S = 0.01


def end_call() -> None:
    """End every other process of this uid; SystemExit if one is still alive after END_WAIT_S."""
    deadline = time.monotonic() + END_WAIT_S
    while True:
        with contextlib.suppress(ProcessLookupError):  # none was left to signal
            os.kill(-1, signal.SIGKILL)
        left = others()
        if not left:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"processes {left} of this call outlived {END_WAIT_S:.0f}s of kills")
        time.sleep(END_PAUSE_S)


def others() -> list[int]:
    """The live processes of this uid in the container other than this server."""
    uid, found = os.getuid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            status = dict(
                line.split(":", 1)
                for line in Path(f"/proc/{entry}/status").read_text().splitlines()
            )
        except OSError:  # gone meanwhile
            continue
        real, _effective, saved, *_ = (int(u) for u in status["Uid"].split())
        # A zombie leader whose other threads run is alive; a plain zombie can do nothing.
        alive = status["State"].split()[0] not in ("Z", "X") or int(status["Threads"]) > 1
        if uid in (real, saved) and alive:  # whom kill() may signal: real or saved uid
            found.append(int(entry))
    return found


def check_alone() -> None:
    """SystemExit unless end_call can only reach what calls start: the server was exec'd
    into a container's PID namespace (its parent is outside it, so it reads as 0), does not
    run as root, and no other process of its uid is there yet (the keeper has another)."""
    if os.getppid() != 0 or os.getuid() == 0:
        raise SystemExit("the tool server runs only as a non-root `docker exec` in its container")
    if left := others():
        raise SystemExit(f"processes {left} share the tool server's uid before any call")


def serve(
    workspace: Path,
    channel_in: BinaryIO,
    channel_out: BinaryIO,
    *,
    ending: Callable[[], None],
) -> None:
    """Answer requests until the channel closes; `ending` runs after each call, before its reply."""
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
        reply = handle(request, workspace, cancel)
        ending()  # cancelled, timed out or done: the call ends whole before it is answered
        send(reply)


def main() -> None:
    channel_in, channel_out = private_channel()
    check_alone()
    workspace = Path(sys.argv[1] if len(sys.argv) > 1 else "/workspace")
    serve(workspace, channel_in, channel_out, ending=end_call)


if __name__ == "__main__":
    main()
