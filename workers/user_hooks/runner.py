"""Running one hook: on this machine (host_programs, the one place gaffer starts a host
program: a clean environment, a folder outside the workspace), or in the sandbox of the
agent whose tool ran. Its output is capped and its time limited; a hook that cannot
start, fails, hangs or floods is said in one line, never raised."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from workers import host_programs
from workers.user_hooks.config import Hook

MAX_OUTPUT_BYTES = 64 * 1024
IN_SANDBOX_TEXT = 8 * 1024  # characters per text of the JSON a hook in a sandbox gets
BLOCK = 2  # Claude Code's exit code for "block", and for "tell the agent" after a tool
_JSON_END = "GAFFER_HOOK_JSON_END"


@dataclass(frozen=True)
class HookRun:
    exit_code: int | None
    """None: it never ended on its own (timed out, flooded) or never started."""
    stdout: str = ""
    stderr: str = ""
    problem: str = ""
    """What went wrong, in words: could not start, timed out, flooded its output."""
    elapsed_s: float = 0.0

    @property
    def blocks(self) -> bool:
        return self.exit_code == BLOCK

    @property
    def failed(self) -> bool:
        return bool(self.problem) or self.exit_code not in (0, BLOCK)

    def said(self) -> str:
        """Why it blocked or what it adds: its stderr, else its stdout, in one paragraph."""
        return " ".join((self.stderr.strip() or self.stdout.strip()).split())[:2000]

    def trouble(self) -> str:
        if self.problem:
            return self.problem
        tail = " ".join(self.stderr.split())[-300:]
        return f"exited {self.exit_code}" + (f": {tail}" if tail else "")


def on_host(
    hook: Hook, payload: dict[str, Any], workspace: Path, cwd: Path | None = None
) -> HookRun:
    """The hook on this machine, its JSON on stdin, from `cwd` (default: a folder outside
    the workspace), given only the plain variables and those it names."""
    started = time.monotonic()
    fd, name = tempfile.mkstemp(prefix="gaffer-hook-", suffix=".json")  # 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(payload, file)
        env = host_programs.environment(
            *hook.env,
            values={
                "GAFFER_HOOK_INPUT": name,
                "GAFFER_WORKSPACE": str(workspace),
                "GAFFER_HOOK": hook.moment,
            },
        )
        # stdin is the payload's file: `exec <` before the hook's own lines
        script = f'exec <"$GAFFER_HOOK_INPUT"\n{hook.command}'
        try:
            process = host_programs.start(
                ["bash", "-c", script],
                cwd=str(cwd) if cwd is not None else host_programs.FALLBACK_FOLDER,
                env=env,
                new_session=True,
            )
        except OSError as error:
            return HookRun(None, problem=f"could not start: {error.strerror or error}")
        return _waited(process, hook.timeout, started)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)


def _waited(process: Any, timeout: float, started: float) -> HookRun:
    out: list[bytes] = []
    err: list[bytes] = []
    flooded = threading.Event()
    readers = [
        threading.Thread(target=_read_capped, args=(process.stdout, out, flooded), daemon=True),
        threading.Thread(target=_read_capped, args=(process.stderr, err, flooded), daemon=True),
    ]
    for reader in readers:
        reader.start()
    deadline = started + timeout
    while process.poll() is None and time.monotonic() < deadline and not flooded.is_set():
        time.sleep(0.02)
    problem = ""
    if process.poll() is None:
        problem = (
            f"flooded its output (more than {MAX_OUTPUT_BYTES // 1024} KB); stopped"
            if flooded.is_set()
            else f"did not end within {timeout:g} s; stopped"
        )
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    with contextlib.suppress(OSError):  # what it left running in the background goes too
        os.killpg(process.pid, signal.SIGKILL)
    for reader in readers:
        reader.join(timeout=2)
    text = [b"".join(part).decode("utf-8", errors="replace") for part in (out, err)]
    code = None if problem else process.returncode
    return HookRun(code, text[0], text[1], problem, round(time.monotonic() - started, 3))


def _read_capped(stream: IO[bytes], into: list[bytes], flooded: threading.Event) -> None:
    kept = 0
    while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
        if kept < MAX_OUTPUT_BYTES:
            into.append(chunk[: MAX_OUTPUT_BYTES - kept])
        kept += len(chunk)
        if kept > MAX_OUTPUT_BYTES:
            flooded.set()


def in_sandbox_script(hook: Hook, payload: dict[str, Any]) -> str:
    """The hook as a command for the agent's own shell, its JSON on stdin (a here-document
    whose end no JSON text can hold: json.dumps writes no raw line break). A command line
    has a size limit: each long text in it is cut, and the JSON says so (`truncated`)."""
    capped = _capped(payload)
    if capped != payload:
        capped["truncated"] = True
    text = json.dumps(capped, ensure_ascii=False)  # UTF-8 as it is: a sixth of \uXXXX
    return f"{{ {hook.command}\n}} <<'{_JSON_END}'\n{text}\n{_JSON_END}"


def _capped(value: Any) -> Any:
    if isinstance(value, str):
        return value[:IN_SANDBOX_TEXT]
    if isinstance(value, dict):
        return {k: _capped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_capped(v) for v in value]
    return value
