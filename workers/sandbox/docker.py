"""The Docker sandbox: one container per worker run, tools served from inside it.

The container holds the workspace at /workspace and nothing else from the host: no
network, no capabilities, no new privileges, a read-only root, a non-root user, memory,
CPU and process limits, and an environment with no host variables. What the host later
runs on its own (every `.git`, git's hooks folder, `.mcp.json`, `.gaffer`) is mounted
read-only, and what appears of that kind anyway is moved aside at the end (guard.py).

The tool server is started with `docker exec`, not as the container's main process, and
makes itself non-dumpable: its stdin and stdout, the channel its replies travel on, are
held by no other process in the container and cannot be opened through /proc by the
commands it runs. Each reply must be one bounded, well-formed line answering the request
just sent; anything else ends the worker with a clear error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from workers.facts import TOOL_FACTS, BadFacts, Facts
from workers.limits import Budget
from workers.processes import owner_token
from workers.sandbox import SandboxFault, SandboxUnavailable, guard, leftovers
from workers.sandbox.container import (
    ENVIRONMENT,
    WORKSPACE,
    container_spec,
    create,
    output_folder,
)
from workers.sandbox.frames import FrameReader
from workers.sandbox.guard import Survey
from workers.sandbox.image import image_hash
from workers.sandbox.options import DockerOptions
from workers.sandbox.quarantine import Quarantined
from workers.tools import outputs
from workers.tools.base import Args, Tool, ToolResult

# Time for the tool server to start and say it is ready; an image cold from disk can
# take a second or two on a busy machine.
READY_TIMEOUT_S = 30.0
# Beyond the agent's own deadline, how long to wait for an answer before declaring the
# server dead; covers the kill of a timed-out command and the reply.
ANSWER_GRACE_S = 10.0
# A call with no deadline still cannot hang the run forever.
NO_DEADLINE_WAIT_S = 3600.0
# Isolated mode (-I): neither /workspace nor any PYTHON* variable is on the server's
# import path, so nothing the agent writes there can stand in for gaffer's own code.
SERVER_COMMAND = [
    "python3",
    "-I",
    "-B",
    "-c",
    "import sys; sys.path[:0] = ['/opt/gaffer/app', '/opt/gaffer/site']; "
    "from workers.sandbox.tool_server import main; main()",
]


def client() -> Any:
    """A Docker client, or SandboxUnavailable saying how to get one."""
    try:
        import docker
    except ImportError as error:
        raise SandboxUnavailable(
            "the `docker` Python package is missing; run `make install`"
        ) from error
    try:
        docker_client = docker.from_env(version="auto", timeout=30)
        docker_client.ping()
    except Exception as error:
        if where := os.environ.get("DOCKER_HOST"):
            raise SandboxUnavailable(
                f"cannot reach the Docker daemon at DOCKER_HOST={where} ({_reason(error)}): "
                "is that daemon running? Unset DOCKER_HOST to use the local one"
            ) from error
        raise SandboxUnavailable(
            f"cannot reach the Docker daemon ({_reason(error)}); install docker.io and "
            "start dockerd"
        ) from error
    return docker_client


def _reason(error: BaseException) -> str:
    """Why a connection failed, in words: the deepest OS error's (not the reprs of the
    exceptions the Docker SDK wraps it in)."""
    found: BaseException | None = error
    said = ""
    while found is not None:
        if isinstance(found, OSError) and found.strerror:
            said = found.strerror
        for arg in getattr(found, "args", ()):
            if isinstance(arg, OSError) and arg.strerror:
                said = arg.strerror
            if isinstance(arg, tuple):
                said = next(
                    (a.strerror for a in arg if isinstance(a, OSError) and a.strerror), said
                )
        found = found.__cause__ or found.__context__
    return said or _short(error)


def check_image(docker_client: Any, image: str, expected: str | None = None) -> None:
    """SandboxUnavailable unless `image` is built from this gaffer's tool code (`expected`:
    its image_hash, when computed elsewhere: a cluster node has no Dockerfile to hash)."""
    import docker.errors

    try:
        found = docker_client.images.get(image)
    except docker.errors.ImageNotFound as error:
        raise SandboxUnavailable(
            f"the sandbox image {image} is not built; run `make sandbox-image`"
        ) from error
    built_for = (found.labels or {}).get("gaffer.tools")
    if built_for is not None and built_for != (expected or image_hash()):
        raise SandboxUnavailable(
            f"the sandbox image {image} was built from other code than this gaffer's; run `make sandbox-image`"
        )


@contextlib.contextmanager
def docker_sandbox(
    workspace: Path,
    options: DockerOptions,
    *,
    run_id: str,
    agent_id: str,
    uid: int | None = None,
    docker_client: Any = None,
    git_dir: Path | None = None,
    tools_hash: str | None = None,
    read_only: tuple[str, ...] = (),
) -> Iterator[DockerSandbox]:
    """Start a container for one worker run, and remove it however the run ends; then
    move aside anything it planted that the host would run (`sandbox.quarantined`).
    `read_only`: workspace files it may not change either (the tests its task keeps)."""
    docker_client = docker_client or client()
    check_image(docker_client, options.image, tools_hash)
    before = guard.survey(workspace)
    output_dir = output_folder(workspace, f"{run_id}-{agent_id}", uid)
    spec = container_spec(
        workspace, options, uid, before.mounts, git_dir, output_dir, read_only=read_only
    )
    name, owner = f"gaffer-{run_id}-{agent_id}-{secrets.token_hex(3)}", owner_token()
    # Written first: a run killed at any moment after this is swept by the next gaffer.
    try:
        leftovers.write_record(name, workspace, before, owner)
    except OSError as error:
        raise SandboxUnavailable(f"cannot keep a record of the container: {error}") from error
    sandbox: DockerSandbox | None = None
    try:
        sandbox = DockerSandbox(
            create(docker_client, spec, name, owner, run_id, agent_id), before, output_dir
        )
        sandbox.container.start()
        sandbox.connect(docker_client, spec.user)
        yield sandbox
    finally:
        # Whole, even when a second Ctrl-C lands in the middle of it.
        quarantined = _until_done(
            lambda: _clean_up(
                docker_client, name, workspace, before, output_dir, options.keep_built
            )
        )
        leftovers.forget(name)  # only once swept: a fault above keeps it for the reaper
        if sandbox is not None:
            sandbox.quarantined = quarantined


def _clean_up(
    docker_client: Any,
    name: str,
    workspace: Path,
    before: Survey,
    output_dir: Path,
    keep_built: tuple[str, ...],
) -> list[Quarantined]:
    """Remove the container, then move out what it planted; its output folder goes too.
    Nothing is swept while the container may still run: it could swap a folder for a link
    under the sweep's feet. Then the record stays, and the next gaffer sweeps."""
    if not leftovers.remove_container(docker_client, name):
        raise SandboxFault(
            f"the container {name} could not be removed, so its workspace was not swept; "
            "the next gaffer command removes it and sweeps"
        )
    leftovers.mark_removed(name)
    shutil.rmtree(output_dir, ignore_errors=True)
    try:
        return guard.sweep(workspace, before, name, keep_built=keep_built)
    except OSError as error:
        raise SandboxFault(f"cannot move aside what the container planted: {error}") from error


def _until_done(clean_up: Callable[[], list[Quarantined]]) -> list[Quarantined]:
    """Run the clean-up to its end, again if an interrupt cut it; the interrupt after."""
    interrupted = False
    while True:
        try:
            done = clean_up()
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt
    return done


class _Reply(BaseModel):
    """One answer of the tool server, as it must look."""

    model_config = ConfigDict(extra="forbid")

    id: int
    output: str = ""
    summary: str = ""
    is_error: bool = False
    facts: dict[str, Any] = {}


class DockerSandbox:
    name = "docker"

    def __init__(self, container: Any, survey: Survey, output_dir: Path | None = None) -> None:
        self.container = container
        self.output_dir = output_dir
        """Where the container's saved outputs are on the host (outputs.CONTAINER_FOLDER)."""
        self.container_id: str | None = container.short_id
        self.survey = survey
        self.quarantined: list[Quarantined] = []
        """What the container planted that the host would run, moved aside at the end."""
        self._lock = threading.Lock()
        self._ids = 0
        self.info: dict[str, Any] = {}

    def connect(self, docker_client: Any, user: str) -> None:
        """Start the tool server and wait for its first line."""
        api = docker_client.api
        exec_id = api.exec_create(
            self.container.id,
            SERVER_COMMAND,
            stdin=True,
            stdout=True,
            stderr=True,
            user=user,
            workdir=WORKSPACE,
            environment=ENVIRONMENT,
        )["Id"]
        raw = api.exec_start(exec_id, socket=True)
        self._raw = raw  # keeps the HTTP response that owns the socket alive
        self._socket: socket.socket = getattr(raw, "_sock", raw)
        self._frames = FrameReader(self._socket)
        try:
            line = self._frames.next_line(time.monotonic() + READY_TIMEOUT_S, lambda: False)
            self.info = json.loads(line) if line is not None else {}
        except (SandboxFault, ValueError):
            line = None
        if line is None or not self.info.get("ready"):
            raise SandboxUnavailable(
                f"the tool server in container {self.container_id} did not start: {self._frames.stderr_tail()}"
            )

    def run(
        self, tool: Tool[Any], args: Args, budget: Budget, output_chars: int | None = None
    ) -> ToolResult:
        with self._lock:
            self._ids += 1
            seconds = budget.seconds_left()
            request = {
                "id": self._ids,
                "tool": tool.name,
                "args": args.model_dump(),
                "seconds": seconds,
                "max_output_chars": output_chars,
            }
            self._send(request)
            wait = NO_DEADLINE_WAIT_S if seconds is None else max(0.0, seconds) + ANSWER_GRACE_S
            cancel_sent = False

            def cancelled() -> bool:
                nonlocal cancel_sent
                if budget.cancelled() and not cancel_sent:
                    self._send({"cancel": True})
                    cancel_sent = True
                return False  # keep waiting: the server answers once the command is killed

            line = self._frames.next_line(time.monotonic() + wait, cancelled)
            if line is None:
                raise SandboxFault(
                    f"the tool server in container {self.container_id} stopped answering "
                    f"({self._frames.stderr_tail() or 'no error output'})"
                )
            reply = self._check(line, self._ids)
        return self._result(reply)

    def _result(self, reply: _Reply) -> ToolResult:
        """A checked reply as the result the model reads; its facts only if they are a
        tool's to give."""
        try:
            facts = Facts.from_json(reply.facts, TOOL_FACTS)
        except BadFacts as error:
            raise SandboxFault(
                f"the tool server in container {self.container_id} sent facts gaffer never "
                f"writes ({error}); the worker is stopped"
            ) from error
        saved = facts.output_file
        name = outputs.saved_name(outputs.CONTAINER_FOLDER, saved) if saved else None
        return ToolResult(
            output=reply.output,
            summary=reply.summary,
            is_error=reply.is_error,
            facts=dataclasses.replace(
                facts,
                container=self.container_id,
                # Where the host finds it; a name the tool server never writes is dropped.
                output_file=str(self.output_dir / name) if name and self.output_dir else None,
            ),
        )

    def _check(self, line: str, expected: int) -> _Reply:
        try:
            reply = _Reply.model_validate_json(line)
        except ValidationError as error:
            raise SandboxFault(
                f"the tool server in container {self.container_id} sent a malformed reply "
                f"({error.error_count()} problem(s), first: {error.errors()[0]['msg']}); "
                "the worker is stopped"
            ) from error
        if reply.id != expected:
            raise SandboxFault(
                f"the tool server in container {self.container_id} answered request "
                f"{reply.id} while {expected} was waiting; the worker is stopped"
            )
        return reply

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self._socket.sendall((json.dumps(message) + "\n").encode())
        except OSError as error:
            raise SandboxFault(f"the container {self.container_id} is gone: {error}") from error


def _short(value: object, limit: int = 200) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else "…" + text[-limit:]
