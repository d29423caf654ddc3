"""run_shell: a command in the workspace with a timeout, capped output and a policy."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from pydantic import Field

from workers import host_programs
from workers.facts import Facts
from workers.tools import outputs, shell_policy
from workers.tools.base import Args, Tool, ToolContext, ToolError, ToolResult
from workers.tools.git_paths import git_env

DEFAULT_TIMEOUT_S = 120
MAX_TIMEOUT_S = 600
# What the model reads: head and tail of the output, the rest in a file it can read.
MAX_OUTPUT_CHARS = 30_000
# Room kept for the line that ends every result: "[exit code 1; 2.3s]".
FOOTER_ROOM = 100
# A command that floods output is killed here rather than filling the disk.
MAX_SAVED_BYTES = 64 * 1024 * 1024
POLL_S = 0.05
# Variables that look like credentials never reach a command on the host.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


class RunShellArgs(Args):
    command: str = Field(description="A bash command, run in the workspace root.")
    timeout: int | None = Field(
        None,
        ge=1,
        le=MAX_TIMEOUT_S,
        description=f"Seconds before the command is killed. Default {DEFAULT_TIMEOUT_S}, max {MAX_TIMEOUT_S}.",
    )


def run_shell(ctx: ToolContext, args: RunShellArgs) -> ToolResult:
    command = args.command
    if not command.strip():
        raise ToolError("the command is empty")
    unasked = False
    if ctx.guard_shell:
        verdict = shell_policy.check(command, ctx.workspace)
        unasked = verdict.allowed
        if not verdict.allowed and not ctx.approve(command, verdict.reason):
            return ToolResult(
                output=f"denied: the command was not run ({verdict.reason}). "
                "Use the file tools instead, or a read-only command.",
                summary="denied",
                is_error=True,
                facts=Facts(command=command, denied=True),
            )
    timeout = float(args.timeout or DEFAULT_TIMEOUT_S)
    if ctx.deadline is not None:
        timeout = max(1.0, min(timeout, ctx.deadline - time.monotonic()))
    shown = ctx.output_cap(MAX_OUTPUT_CHARS) - FOOTER_ROOM
    folder = outputs.folder(ctx)
    return execute(ctx.workspace, command, timeout, ctx.cancelled, shown, folder, unasked=unasked)


def execute(
    workspace: Path,
    command: str,
    timeout: float,
    cancelled: Callable[[], bool] = lambda: False,
    shown_chars: int = MAX_OUTPUT_CHARS,
    output_dir: Path | None = None,
    *,
    unasked: bool = False,
) -> ToolResult:
    """Run `command` with bash in its own process group; the whole group dies at the end.
    In a container the tool server then ends every other process the call started
    (tool_server.end_call), detached ones included. `unasked`: the host's allowlist let
    it run without the user's word, so it finds no program inside the workspace."""
    out_path, fd = outputs.new_file(output_dir or outputs.folder(ToolContext(workspace)))
    started = time.monotonic()
    killed_for = ""
    with os.fdopen(fd, "w+b") as out:
        # The command is the agent's, so it runs in the workspace with the user's own
        # environment less secrets; bash itself is never one found inside the workspace.
        proc = host_programs.start(
            ["bash", "-c", command],
            cwd=workspace,
            env=_clean_env(workspace if unasked else None),
            stdout=out,
            stderr=subprocess.STDOUT,
            new_session=True,
        )
        try:
            while True:
                try:
                    proc.wait(timeout=POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if cancelled():
                    killed_for = "the agent was cancelled"
                    break
                if time.monotonic() - started > timeout:
                    killed_for = f"timed out after {timeout:.0f}s"
                    break
                if os.fstat(out.fileno()).st_size > MAX_SAVED_BYTES:
                    killed_for = f"printed more than {MAX_SAVED_BYTES // (1024 * 1024)} MB"
                    break
        finally:
            # Also reaps what the command left in the background: a tool call ends whole.
            _kill_group(proc)
        exit_code = proc.wait()
        text, saved = _shown_output(out, out_path, shown_chars)
    elapsed = time.monotonic() - started
    status = f"killed: {killed_for}" if killed_for else _exit_status(exit_code)
    footer = f"[{status}; {elapsed:.1f}s]"
    summary = f"{'killed, ' + killed_for if killed_for else f'exit {exit_code}'} in {elapsed:.1f}s"
    return ToolResult(
        output=f"{text.rstrip()}\n{footer}" if text.strip() else f"(no output)\n{footer}",
        summary=summary,
        is_error=bool(killed_for) or exit_code != 0,
        facts=Facts(
            command=command,
            exit_code=None if killed_for else exit_code,
            timed_out=killed_for.startswith("timed out"),
            output_file=saved,
        ),
    )


def _exit_status(code: int) -> str:
    if code >= 0:
        return f"exit code {code}"
    name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
    hint = " (in a sandbox, usually the memory limit)" if -code == signal.SIGKILL else ""
    return f"exit code {code}: killed by {name}{hint}"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _shown_output(out: BinaryIO, path: Path, shown_chars: int) -> tuple[str, str | None]:
    """The output as the model sees it, and the saved file's path when it was cut.

    Read back through the descriptor the command wrote to, not through its path.
    """
    size = os.fstat(out.fileno()).st_size
    out.seek(0)
    if size <= shown_chars:
        text = out.read().decode("utf-8", errors="replace")
        if len(text) <= shown_chars:
            path.unlink(missing_ok=True)
            return text, None
    rel = str(path)
    # The tail is where tests and builds say what failed: it gets the larger part.
    room = max(0, shown_chars - 200)
    head_bytes, tail_bytes = room // 3, room - room // 3
    out.seek(0)
    head = out.read(head_bytes).decode("utf-8", errors="replace")
    out.seek(max(head_bytes, size - tail_bytes))
    tail = out.read().decode("utf-8", errors="replace")
    cut = size - len(head.encode()) - len(tail.encode())
    middle = f"\n\n[... {cut} bytes cut; the full output is in {rel}: read_file it with offset to see more ...]\n\n"
    return head + middle + tail, rel


def looks_secret(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def _clean_env(kept_out: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not looks_secret(k)}
    if kept_out is not None:
        # An `ls` or `git` run unasked must not be a program the repository ships: no
        # folder inside the workspace (`node_modules/.bin`, `.`, an empty entry) on PATH.
        # A command the user approved runs as they would run it (their venv's pytest).
        env["PATH"] = host_programs.safe_path(env.get("PATH", os.defpath), outside=kept_out)
    # Nobody is there to page or answer prompts.
    env.update(PAGER="cat", GIT_PAGER="cat", GIT_TERMINAL_PROMPT="0")
    # A repository planted in the workspace must not run its fsmonitor through `git status`.
    return git_env(env)


RUN_SHELL = Tool(
    name="run_shell",
    description=(
        "Run a bash command in the workspace root and get its output and exit code. "
        f"Default timeout {DEFAULT_TIMEOUT_S}s (max {MAX_TIMEOUT_S}); the command is killed then. "
        "When the call ends (done, timed out or cancelled), what the command started ends "
        "too, so start a server or watcher and use it in the same command: in the Docker "
        "sandbox every process it started, detached ones (setsid, nohup, double fork) "
        "included; on the host the command's process group (a process that calls setsid "
        "leaves it and is not killed). "
        f"Output past {MAX_OUTPUT_CHARS} characters keeps its head and tail; the full text is "
        "saved to a file named in the result. No input can be typed: use non-interactive "
        "flags. Prefer read_file/grep/find_files for reading."
    ),
    args=RunShellArgs,
    run=run_shell,
    read_only=False,
)
