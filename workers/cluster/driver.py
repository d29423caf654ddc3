"""The driver's side of the Ray backend: connecting with Ray's token authentication,
the workspace sent once per batch (one bundle per snapshot, through Ray's object
store), a worker's hands placed on a node that advertises a free `gaffer_reader` or
`gaffer_sandbox` slot, and every tool call sent there and waited for with a deadline.

A node that dies ends its workers with NodeLost, naming the node: never retried
silently. Ray is an optional extra; without it `--cluster` says what to install.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workers.changes.snapshots import Store, Tree
from workers.cluster.bundle import BundleError, make_bundle
from workers.cluster.node import LeftoversSweep, NodeHands, Placement, SentBack
from workers.limits import Budget
from workers.sandbox import NodeLost, SandboxFault, SandboxUnavailable
from workers.tools.base import Args, Tool, ToolResult

CONNECT_TIMEOUT_S = 60.0
PROBE_TIMEOUT_S = 3.0
"""How long the first look at the cluster's port may take before ray.init is tried."""
# The head's client proxy starts a server process for each driver; on a busy head that
# start can fail ("Starting Ray client server failed", from `start_specific_server`) and
# work on a later try: a 2-core machine running a whole test suite saw two in a row.
_SERVER_DID_NOT_START = ("Starting Ray client server failed", "start_specific_server")
CONNECT_TRIES = 4
CONNECT_RETRY_S = 2.0
"""The wait before the second try; each later one waits this much longer."""
# A worker waits this long for a node with a free slot before it fails, naming the slot.
PLACEMENT_TIMEOUT_S = 120.0
# Beyond a call's own deadline: the node's reply, and the kill of a timed-out command.
ANSWER_GRACE_S = 15.0
NO_DEADLINE_WAIT_S = 3600.0
FINISH_TIMEOUT_S = 120.0
INSTALL_HINT = "the Ray backend needs Ray: pip install 'gaffer[ray]' (or ray[client]>=2.52)"
TOKEN_FILE = Path("~/.ray/auth_token")
READER, SANDBOX = "gaffer_reader", "gaffer_sandbox"
SWEEP_NAMESPACE = "gaffer"


@dataclasses.dataclass(frozen=True)
class NodeStatus:
    node: str
    node_id: str
    alive: bool
    readers: tuple[int, int]
    """(free, total) `gaffer_reader` slots."""
    sandboxes: tuple[int, int]
    image: str
    """`ready`, or what is wrong with the sandbox image there; `-` without sandbox slots."""


@dataclasses.dataclass(frozen=True)
class RemoteCopy:
    """The workspace as one batch of workers on the cluster sees it."""

    base_id: str
    base: Tree
    ref: Any  # the bundle in Ray's object store
    size: int
    path: None = None
    store: None = None

    def remove(self) -> None:
        """The node's checkout goes with its worker; the bundle with the last reference."""


def ray_token(environ: dict[str, str] | None = None) -> str | None:
    """Ray's token, looked for as Ray does: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, its file."""
    environ = dict(os.environ) if environ is None else environ
    if token := environ.get("RAY_AUTH_TOKEN", "").strip():
        return token
    path = Path(environ.get("RAY_AUTH_TOKEN_PATH") or TOKEN_FILE).expanduser()
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


class Cluster:
    def __init__(self, address: str) -> None:
        self.address = address
        # Ray reads its auth mode once, as it is imported: set after, it is never used,
        # and a right token waits out the connect timeout as if it were wrong.
        if token := ray_token():
            os.environ["RAY_AUTH_MODE"] = "token"
            os.environ["RAY_AUTH_TOKEN"] = token
        self._ray = _import_ray()
        self._lock = threading.Lock()
        self._copies: dict[str, RemoteCopy] = {}
        self._actor_class: Any = None

    def connect(self) -> None:
        """Join the cluster as its driver, or SandboxUnavailable in one line."""
        token = ray_token()
        if token is None:
            raise SandboxUnavailable(
                "--cluster needs the cluster's Ray token (gaffer always uses Ray's token "
                "authentication): set RAY_AUTH_TOKEN, or put it in ~/.ray/auth_token "
                "(`ray get-auth-token` on the head prints it)"
            )
        if (closed := _nothing_listening(self.address)) is not None:
            raise SandboxUnavailable(closed)
        import workers

        # The nodes run the driver's own tool code, whatever gaffer they have installed.
        runtime_env = {"py_modules": [str(Path(workers.__file__).parent)]}
        for attempt in range(1, CONNECT_TRIES + 1):
            failure = self._join(runtime_env)
            if failure is None:
                break
            if attempt < CONNECT_TRIES and any(m in str(failure) for m in _SERVER_DID_NOT_START):
                with contextlib.suppress(Exception):
                    self._ray.shutdown()  # the half-made client connection, before the next
                time.sleep(CONNECT_RETRY_S * attempt)
                continue
            hint = " (is the token the cluster's?)" if "timeout" in str(failure) else ""
            raise SandboxUnavailable(
                f"cannot join the Ray cluster at {self.address}: {_short(failure)}{hint}"
            )
        self._actor_class = self._ray.remote(NodeHands)

    def _join(self, runtime_env: dict[str, Any]) -> BaseException | None:
        """One `ray.init` against the cluster: how it failed, or None."""
        failure: list[BaseException] = []

        def join() -> None:
            # Ray warns on stderr as it gives up; the one line gaffer prints says it all.
            warnings.filterwarnings("ignore", module="ray")
            try:
                self._ray.init(
                    self.address,
                    runtime_env=runtime_env,
                    logging_level="ERROR",
                    log_to_driver=False,
                )
            except BaseException as error:
                failure.append(error)

        thread = threading.Thread(target=join, name="gaffer-ray-connect", daemon=True)
        thread.start()
        thread.join(CONNECT_TIMEOUT_S)
        if thread.is_alive():
            raise SandboxUnavailable(
                f"the Ray cluster at {self.address} did not answer in {CONNECT_TIMEOUT_S:.0f} s"
            )
        return failure[0] if failure else None

    def status(self, image: str) -> list[NodeStatus]:
        """Each node of the cluster: its gaffer slots (free of total), and for a live node
        with sandbox slots whether its Docker engine has the sandbox image."""
        ray = self._ray
        free_of = ray.remote(_free_slots).options(num_cpus=0)
        free: dict[str, dict[str, float]] = self.wait(
            free_of.remote(), PLACEMENT_TIMEOUT_S, "the cluster did not say its free slots"
        )
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        rows, probes = [], {}
        for node in ray.nodes():
            node_id, alive = str(node.get("NodeID", "")), bool(node.get("Alive"))
            total = node.get("Resources", {})
            row = NodeStatus(
                node=str(node.get("NodeManagerAddress", "?")),
                node_id=node_id,
                alive=alive,
                readers=(int(free.get(node_id, {}).get(READER, 0)), int(total.get(READER, 0))),
                sandboxes=(int(free.get(node_id, {}).get(SANDBOX, 0)), int(total.get(SANDBOX, 0))),
                image="-" if not alive or not total.get(SANDBOX) else "?",
            )
            rows.append(row)
            if row.image == "?":
                place = NodeAffinitySchedulingStrategy(node_id, soft=False)
                probe = ray.remote(_image_on_node).options(num_cpus=0, scheduling_strategy=place)
                probes[node_id] = probe.remote(image, _tools_hash())
        for n, row in enumerate(rows):
            if row.node_id in probes:
                try:
                    said = self.wait(probes[row.node_id], CONNECT_TIMEOUT_S, "no answer")
                except SandboxFault as error:
                    said = f"unknown ({error})"
                rows[n] = dataclasses.replace(row, image=said)
        return rows

    def copy_of(self, store: Store) -> RemoteCopy:
        """The workspace now, on its way to the nodes: one bundle per distinct snapshot,
        so a batch of workers started together shares one."""
        with self._lock:
            base_id, base = store.snapshot()
            if (known := self._copies.get(base_id)) is not None:
                return known
            try:
                bundle = make_bundle(store, base)
            except (BundleError, OSError, KeyError) as error:
                raise SandboxUnavailable(f"cannot bundle the workspace: {error}") from error
            copy = RemoteCopy(base_id, base, self._ray.put(bundle), len(bundle))
            self._copies = {base_id: copy}  # the last batch's bundle is let go
            return copy

    @contextlib.contextmanager
    def hands(
        self,
        *,
        copy: RemoteCopy,
        run_id: str,
        agent_id: str,
        in_container: bool,
        docker_options: dict[str, Any],
        uid: int | None,
        read_only: tuple[str, ...] = (),
    ) -> Iterator[RemoteSandbox]:
        """A worker's hands on a node with a free slot, closed (and the node's checkout
        removed) however the worker ends; `sent_back` holds its change set."""
        slot = SANDBOX if in_container else READER
        actor = self._actor_class.options(
            num_cpus=0, resources={slot: 1}, max_concurrency=2, max_restarts=0
        ).remote(
            copy.ref,
            run_id=run_id,
            agent_id=agent_id,
            sandbox="docker" if in_container else "host",
            docker_options=docker_options,
            uid=uid,
            tools_hash=_tools_hash(),
            read_only=read_only,
        )
        try:
            placement: Placement = self.wait(
                actor.where.remote(),
                PLACEMENT_TIMEOUT_S,
                f"no node took {agent_id} within {PLACEMENT_TIMEOUT_S:.0f} s: none has a "
                f"free {slot} slot (see `gaffer cluster status`)",
            )
        except BaseException:
            self._ray.kill(actor)
            raise
        sandbox = RemoteSandbox(self, actor, placement)
        try:
            yield sandbox
            if sandbox.lost is None:  # a lost node's worker has ended `interrupted` already
                sent = self.wait(actor.finish.remote(), FINISH_TIMEOUT_S, None, sandbox)
                sandbox.sent_back = sent
        finally:
            if sandbox.lost is None:
                with contextlib.suppress(Exception):
                    self.wait(actor.close.remote(), FINISH_TIMEOUT_S, None, sandbox)
            else:
                self.sweep_when_back(placement.node_ip)
            with contextlib.suppress(Exception):
                self._ray.kill(actor)

    def sweep_when_back(self, node_ip: str) -> None:
        """Have a lost node's leftovers removed once its Ray is back: a detached LeftoversSweep
        waiting on the resource Ray gives a node by its address, outliving this driver."""
        with contextlib.suppress(Exception):  # else the next placement there sweeps
            self._ray.remote(LeftoversSweep).options(
                name=f"gaffer-sweep-{node_ip}",
                namespace=SWEEP_NAMESPACE,
                lifetime="detached",
                get_if_exists=True,
                num_cpus=0,
                resources={f"node:{node_ip}": 0.001},
                # Placed on the node while it was still dying: placed again once it is back.
                max_restarts=-1,
            ).remote()

    def wait(
        self,
        ref: Any,
        seconds: float,
        late: str | None,
        sandbox: RemoteSandbox | None = None,
    ) -> Any:
        """A remote call's answer within `seconds`; NodeLost when its node died,
        SandboxFault when it failed there or was late (`late` says why)."""
        ray = self._ray
        where = f"node {sandbox.node}" if sandbox is not None else "the cluster"
        try:
            return ray.get(ref, timeout=seconds)
        except ray.exceptions.GetTimeoutError:
            raise SandboxFault(late or f"{where} did not answer within {seconds:.0f} s") from None
        except ray.exceptions.RayTaskError as error:
            cause = error.cause if isinstance(error.cause, BaseException) else error
            if isinstance(cause, SandboxUnavailable):
                raise SandboxUnavailable(f"on {where}: {cause}") from None
            raise SandboxFault(f"on {where}: {_short(cause)}") from None
        except (
            ray.exceptions.RayActorError,
            ray.exceptions.NodeDiedError,
            ray.exceptions.ObjectLostError,
            ray.exceptions.OwnerDiedError,
            ray.exceptions.RaySystemError,
        ) as error:
            raise NodeLost(f"{where} was lost ({_short(error)})") from None

    def shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self._ray.shutdown()


class RemoteSandbox:
    """The Sandbox a worker's loop sees for hands on a node: each call sent there."""

    def __init__(self, cluster: Cluster, actor: Any, placement: Placement) -> None:
        self.cluster = cluster
        self.actor = actor
        self.placement = placement
        self.name = placement.sandbox
        self.container_id = placement.container_id
        self.node = f"{placement.node_ip} ({placement.hostname})"
        self.quarantined: list[Any] = []
        self.sent_back: SentBack | None = None
        self.lost: NodeLost | None = None

    def run(
        self, tool: Tool[Any], args: Args, budget: Budget, output_chars: int | None = None
    ) -> ToolResult:
        seconds = budget.seconds_left()
        ref = self.actor.run.remote(tool.name, args.model_dump(mode="json"), seconds, output_chars)
        # Ctrl-C or the caller's cancel reaches the command on the node at once.
        unregister = budget.on_cancel(lambda: self.actor.cancel.remote())
        try:
            wait = NO_DEADLINE_WAIT_S if seconds is None else seconds + ANSWER_GRACE_S
            result: ToolResult = self.cluster.wait(
                ref, wait, f"node {self.node} did not answer {tool.name} in time", self
            )
        except NodeLost as error:
            self.lost = error
            raise
        finally:
            unregister()
        return result


def _free_slots() -> dict[str, dict[str, float]]:
    """Run on the cluster: each node's free resources, by node id."""
    from ray._private.state import available_resources_per_node

    return dict(available_resources_per_node())  # type: ignore[no-untyped-call]


def _tools_hash() -> str:
    from workers.sandbox.image import image_hash

    return image_hash()


def _image_on_node(image: str, tools_hash: str) -> str:
    """Run on one node: whether its Docker engine can start gaffer's sandbox."""
    from workers.sandbox import docker

    try:
        docker.check_image(docker.client(), image, tools_hash)
    except SandboxUnavailable as error:
        return str(error)
    return "ready"


def _nothing_listening(address: str) -> str | None:
    """Why nothing can answer at the cluster's address (the port refuses, the host does
    not resolve), said at once; None when something listens there, or it cannot tell."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    host = host.strip("[]")
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S):
            return None
    except ConnectionRefusedError:
        return (
            f"cannot join the Ray cluster at {address}: nothing is listening there "
            "(connection refused); is the head running (`ray start --head`), and is this "
            "its address and port?"
        )
    except socket.gaierror:
        return f"cannot join the Ray cluster at {address}: {host} does not resolve"
    except (OSError, ValueError):
        return None  # a slow or filtered port: ray.init's own timeout says what it finds


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as error:
        raise SandboxUnavailable(INSTALL_HINT) from error
    return ray


def _short(error: BaseException, limit: int = 240) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
