"""Where an agent's tools run, decided in one place: a spec in a container gets its own
Docker sandbox, made for this run and removed after it, with what the boundary did at
its start and end in the log; any other spec runs on the host, confined to the
workspace, its shell guarded."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from workers.assembly.specs import AgentSpec
from workers.changes.worktrees import Worktree
from workers.cluster.driver import Cluster, RemoteCopy
from workers.log.events import Emitter
from workers.log.schema import Boundary
from workers.sandbox import Sandbox, SandboxUnavailable, docker, leftovers
from workers.sandbox.host import HostSandbox
from workers.sandbox.landing import take_back_line
from workers.tools.base import Approver, ToolContext


class SandboxFactory:
    def __init__(
        self,
        workspace: Path,
        *,
        run_id: str,
        events: Emitter,
        approve: Approver,
        uid: int | None = None,
        cluster: Cluster | None = None,
    ) -> None:
        self.workspace = workspace
        self.cluster = cluster
        self.run_id = run_id
        self.events = events
        """Bound to the run; each sandbox logs as the agent it serves."""
        self.approve = approve
        """Asks the user about a host shell command outside the read-only allowlist."""
        self.uid = uid
        """Containers run as this uid; None: the workspace owner's."""
        self._client: Any = None  # made on first use: runs without Docker never touch it
        self._lock = threading.Lock()

    def __call__(
        self,
        spec: AgentSpec,
        agent_id: str,
        copy: Worktree | RemoteCopy | None = None,
        read_only: tuple[str, ...] = (),
    ) -> AbstractContextManager[Sandbox]:
        """`copy`: the workspace as this worker sees it instead, when it is not the
        workspace itself: an isolated editor's worktree, or a bundle on its way to a
        cluster node (whose tools then run there). `read_only`: workspace-relative files
        a container mounts read-only (the tests the task keeps)."""
        if isinstance(copy, RemoteCopy):
            assert self.cluster is not None
            return self.cluster.hands(
                copy=copy,
                run_id=self.run_id,
                agent_id=agent_id,
                in_container=spec.in_container,
                docker_options=spec.profile.docker.model_dump(),
                uid=self.uid,
                read_only=read_only,
            )
        workspace = copy.path if copy is not None else self.workspace
        if not spec.in_container:
            context = ToolContext(workspace, approve=self.approve, guard_shell=True)
            return contextlib.nullcontext(HostSandbox(context))
        with self._lock:
            if self._client is None:
                try:
                    client = docker.client()
                except SandboxUnavailable as error:
                    raise SandboxUnavailable(
                        f"profile {spec.name!r} runs in Docker and never on the host: {error}"
                    ) from error
                # Containers of crashed runs (kill -9) go before this run adds its own.
                leftovers.remove_leftovers(client)
                self._client = client
        return self._container(spec, agent_id, self._client, workspace, read_only)

    def _git_dir(self) -> Path | None:
        """The workspace's repository, which an isolated editor's worktree points to."""
        git_dir = Path(os.path.realpath(self.workspace / ".git"))
        return git_dir if git_dir.is_dir() and git_dir.parent == self.workspace else None

    @contextlib.contextmanager
    def _container(
        self,
        spec: AgentSpec,
        agent_id: str,
        client: Any,
        workspace: Path,
        read_only: tuple[str, ...],
    ) -> Iterator[Sandbox]:
        """A worker's container, with the boundary's doings at its start and end in the log."""
        log = self.events.bind(agent_id=agent_id, profile=spec.name)
        box: docker.DockerSandbox | None = None
        try:
            with docker.docker_sandbox(
                workspace,
                spec.profile.docker,
                run_id=self.run_id,
                agent_id=agent_id,
                uid=self.uid,
                docker_client=client,
                git_dir=self._git_dir() if workspace != self.workspace else None,
                read_only=read_only,
            ) as box:
                if unshared := box.survey.unshared:
                    log.emit(
                        Boundary(
                            action="unshared",
                            what="hard links",
                            paths=list(unshared[:50]),
                            count=len(unshared),
                            message=f"gave {len(unshared)} file(s) hard-linked outside the workspace "
                            f"their own copies, so the container cannot change the originals "
                            f"({', '.join(unshared[:3])}{', …' if len(unshared) > 3 else ''})",
                        )
                    )
                yield box
        finally:
            for moved in box.quarantined if box is not None else []:
                log.emit(
                    Boundary(
                        action="quarantined",
                        what="planted by the sandbox",
                        path=moved.path,
                        moved_to=moved.moved_to,
                        message=f"{agent_id} made {moved.path}, which may not land in the "
                        f"workspace ({moved.why}); moved it aside to {moved.moved_to}; to take "
                        f"it: {take_back_line(moved.path, moved.moved_to)}",
                    )
                )
