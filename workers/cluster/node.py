"""A worker's hands on a cluster node (a Ray actor, made in driver.py): the workspace
checked out from its bundle into a folder of the node's own, the worker's tools run
there (inside a Docker sandbox of the node's engine for a `docker` profile, confined
to the checkout otherwise), what each call changed seen by snapshots, and at the end
the change set with the contents it needs sent back. Nothing here sees the driver's
disk, its environment or its API key: only a bundle comes in, and only results go out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import socket
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from workers import state
from workers.changes.change_sets import Change
from workers.changes.snapshots import Store
from workers.changes.tracker import ChangeTracker
from workers.cluster.bundle import check_out
from workers.limits import Budget
from workers.processes import owner_gone, owner_token
from workers.sandbox import Sandbox
from workers.sandbox.host import HostSandbox
from workers.sandbox.options import DockerOptions
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import ToolContext, ToolError, ToolResult, error_result

# A folder the node's checkouts go under (in its own `gaffer-node`), instead of the node
# user's state folder (`nodes`).
NODE_ROOT_VAR = "GAFFER_NODE_ROOT"
NODES = "nodes"
# The record gaffer writes in each checkout folder first: who owns it
# (workers/processes.py), so a sweep removes it only when that owner is proven gone.
OWNER_RECORD = "owner"
# An owner token is one short line; a longer record is none of gaffer's.
OWNER_RECORD_BYTES = 256
# Containers run as this uid when the node's Ray runs as root (never root itself).
DEFAULT_SANDBOX_UID = 1000


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a worker's tools run: written on its log lines as `node`."""

    node_ip: str
    hostname: str
    node_id: str
    sandbox: str
    container_id: str | None
    checkout_s: float
    """How long the checkout from the bundle took there."""
    ready_s: float
    """How long the hands took to be ready there: checkout, snapshot and sandbox."""


@dataclasses.dataclass(frozen=True)
class SentBack:
    """An editing worker's change set, with each kept content it needs."""

    changes: list[Change]
    contents: dict[str, bytes]
    quarantined: list[Any]


class NodeHands:
    def __init__(
        self,
        bundle: bytes,
        *,
        run_id: str,
        agent_id: str,
        sandbox: str,
        docker_options: dict[str, Any],
        uid: int | None,
        tools_hash: str | None = None,
        read_only: tuple[str, ...] = (),
    ) -> None:
        """`tools_hash`: the driver's sandbox image hash, which the node's image must match;
        `read_only`: files of the checkout its container mounts read-only."""
        self.tools_hash = tools_hash
        root = node_root()
        reap_checkouts(root)
        self.folder = new_checkout_folder(root, f"{run_id[:12]}-{agent_id}-")
        self.workspace = self.folder / "workspace"
        self._stack = contextlib.ExitStack()
        self._current: Budget | None = None
        self._lock = threading.Lock()
        started = time.monotonic()
        try:
            check_out(bundle, self.workspace)
            self.checkout_s = time.monotonic() - started
            self.store = Store(self.workspace)
            self.tracker = ChangeTracker(self.store)
            self.sandbox = self._sandbox(sandbox, docker_options, run_id, agent_id, uid, read_only)
            self.ready_s = time.monotonic() - started
        except BaseException:
            self.close()
            raise

    def _sandbox(
        self,
        kind: str,
        options: dict[str, Any],
        run_id: str,
        agent_id: str,
        uid: int | None,
        read_only: tuple[str, ...],
    ) -> Sandbox:
        if kind != "docker":
            return HostSandbox(ToolContext(self.workspace, guard_shell=True))
        from workers.sandbox import docker, leftovers

        client = docker.client()
        leftovers.remove_leftovers(client)  # of actors killed with their node's last run
        if os.geteuid() == 0:
            uid = uid or DEFAULT_SANDBOX_UID
            state.chown_tree(self.workspace, uid, uid)  # its folder and record stay ours
        box = docker.docker_sandbox(
            self.workspace,
            DockerOptions.model_validate(options),
            run_id=run_id,
            agent_id=agent_id,
            uid=uid,
            docker_client=client,
            tools_hash=self.tools_hash,
            read_only=read_only,
        )
        return self._stack.enter_context(box)

    def where(self) -> Placement:
        import ray

        return Placement(
            node_ip=ray.util.get_node_ip_address(),  # type: ignore[no-untyped-call]
            hostname=socket.gethostname(),
            node_id=ray.get_runtime_context().get_node_id(),
            sandbox=self.sandbox.name,
            container_id=self.sandbox.container_id,
            checkout_s=round(self.checkout_s, 4),
            ready_s=round(self.ready_s, 4),
        )

    def run(
        self,
        name: str,
        arguments: dict[str, Any],
        seconds_left: float | None,
        output_chars: int | None,
    ) -> ToolResult:
        """One tool call, already validated on the driver, validated again here."""
        tool = BUILTIN_TOOLS.get(name)
        if tool is None:
            return error_result(f"{name} does not run on a cluster node")
        budget = Budget(None, seconds_left)
        with self._lock:
            self._current = budget
        try:
            result = self.sandbox.run(
                tool, tool.args.model_validate(arguments), budget, output_chars
            )
        except ToolError as error:
            return error_result(str(error))
        finally:
            with self._lock:
                self._current = None
        if not tool.read_only:
            changed = self.tracker.changed_by_call()
            paths = tuple(p for c in changed for p in (c.old_path, c.path) if p is not None)
            result = dataclasses.replace(
                result, facts=dataclasses.replace(result.facts, modified=paths)
            )
        return result

    def cancel(self) -> None:
        """Stop the call in progress (a command is killed), from the driver's Ctrl-C."""
        with self._lock:
            if self._current is not None:
                self._current.cancel()

    def finish(self) -> SentBack:
        """Close the sandbox, and the change set since the checkout with its contents."""
        self._stack.close()
        quarantined = list(self.sandbox.quarantined)
        _, changes = self.tracker.finish()
        contents = {}
        for change in changes:
            if change.after is not None and change.after.kept:
                contents[change.after.digest] = self.store.read(change.after.digest)
        return SentBack(changes, contents, quarantined)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._stack.close()
        remove_checkout(self.folder)


class LeftoversSweep:
    """Placed on a node whose Ray died under a worker, as soon as it is back (the driver
    asks for it when it learns the node is lost, detached, so it outlives the driver):
    the checkouts and containers of hands whose process is gone are removed there and
    then, not at the next worker placed there. It ends itself when done."""

    def __init__(self) -> None:
        import ray

        self.removed = sweep_leftovers()
        ray.actor.exit_actor()  # type: ignore[no-untyped-call]


def sweep_leftovers() -> int:
    """Remove this node's checkouts and containers whose owner is gone; how many checkouts."""
    removed = reap_checkouts(node_root())
    with contextlib.suppress(Exception):  # no Docker here: no container to remove
        from workers.sandbox import docker, leftovers

        leftovers.remove_leftovers(docker.client())
    return removed


def node_root() -> Path:
    """Where this node keeps checkouts: a folder of the node's user alone, 0700, never a
    link, made when missing; one of that name someone else made or left open is refused
    (state.UnsafeState), never used."""
    given = os.environ.get(NODE_ROOT_VAR)
    if given:
        return state.private_root(Path(given) / "gaffer-node")
    return state.private_root(state.root() / NODES)


def new_checkout_folder(root: Path, prefix: str) -> Path:
    """A new folder under `root` for one checkout, its owner record (this process) written
    first: hands killed at any moment after are proven gone by the next sweep."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    state.write_file(folder, OWNER_RECORD, owner_token().encode())
    return folder


def remove_checkout(folder: Path) -> None:
    """Remove a checkout folder through its root's handle (never through a link), and
    its workspace's state: snapshots, output and quarantine."""
    root = state.open_private(folder.parent)
    try:
        shutil.rmtree(folder.name, dir_fd=root, ignore_errors=True)
    finally:
        os.close(root)
    state.forget_workspace(folder / "workspace")


def reap_checkouts(root: Path) -> int:
    """Remove the checkouts whose owner record names an owner proven gone (their driver was
    killed, or the node's Ray restarted); how many. A folder without gaffer's record, or a
    link, is left alone: no name is read as a pid."""
    fd = state.open_private(root)
    try:
        gone = [name for name in os.listdir(fd) if _owner_gone(fd, name)]
    finally:
        os.close(fd)
    for name in gone:
        remove_checkout(root / name)
    return len(gone)


def _owner_gone(root: int, name: str) -> bool:
    """Whether `name` in `root` is a checkout folder of ours whose record's owner is gone."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        folder = os.open(name, flags | os.O_DIRECTORY, dir_fd=root)
    except OSError:
        return False  # a link or a file: never a checkout
    try:
        record = os.open(OWNER_RECORD, flags | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return False
    finally:
        os.close(folder)
    with os.fdopen(record, "rb") as file:
        info = os.fstat(record)
        ours = stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()
        token = file.read(OWNER_RECORD_BYTES) if ours else b""
    return bool(token) and owner_gone(token.decode("ascii", errors="replace").strip())
