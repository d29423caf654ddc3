"""A two-node Ray cluster for the tests, on addresses the tests make themselves.

Node A (the head, with no gaffer slots) and the driver live in network namespace A;
node B, with reader and sandbox slots, in namespace B, joined to A by a veth pair
(10.213.0.1 and 10.213.0.2). Nothing binds the machine's own interfaces. Node B has a
Docker engine of its own (its own socket and data root, no bridge: sandbox containers
have no network, so it needs none), loaded with the sandbox image as the README says (`docker save |
docker load`), and a mount namespace in which the driver's temporary folders are an
empty tmpfs: a worker there that reached for the driver's workspace would find nothing.
Ray's token authentication is on.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests.conftest import must_run_here

HEAD_IP, NODE_IP = "10.213.0.1", "10.213.0.2"
GCS_PORT, CLIENT_PORT = 6390, 10001
START_TIMEOUT_S = 120
RAY = str(Path(sys.executable).with_name("ray"))
T = TypeVar("T")


@dataclass
class TwoNodes:
    head: str
    node: str
    token: str
    folder: Path
    node_root: Path
    docker_b: str
    """DOCKER_HOST of node B's engine."""
    start_b: list[str] = field(default_factory=list)
    """The command that starts node B's Ray, and its environment."""
    env_b: dict[str, str] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"ray://{HEAD_IP}:{CLIENT_PORT}"

    def env(self) -> dict[str, str]:
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token}

    def in_head(self, command: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.head, *command]

    def ray_pids_of_b(self) -> list[int]:
        """Node B's Ray processes (its Docker engine is left alone)."""
        listed = subprocess.run(["ip", "netns", "pids", self.node], capture_output=True, text=True)
        pids = []
        for pid in listed.stdout.split():
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"dockerd" not in command and b"containerd" not in command:
                pids.append(int(pid))
        return pids

    def kill_node_b(self) -> None:
        """Node B's Ray dies at once, as with a machine that is lost."""
        for pid in self.ray_pids_of_b():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def restart_node_b(self) -> None:
        """Node B's Ray started again at the same address, as a machine that comes back."""
        self.kill_node_b()
        _run(*self.start_b, env=self.env_b, timeout=START_TIMEOUT_S)

    def checkouts_on_b(self) -> list[str]:
        root = self.node_root / "gaffer-node"
        return sorted(p.name for p in root.iterdir()) if root.is_dir() else []

    def containers_on_b(self) -> list[str]:
        done = subprocess.run(
            ["docker", "-H", self.docker_b, "ps", "-aq", "--filter", "label=gaffer.sandbox"],
            capture_output=True,
            text=True,
        )
        return done.stdout.split()


def in_namespace(name: str, make: Callable[[], T]) -> T:
    """`make()` run in a thread that joined network namespace `name`: a socket it binds
    stays in that namespace (a fake model server beside the driver)."""
    box: dict[str, Any] = {}

    def body() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
        try:
            if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
                box["error"] = OSError(ctypes.get_errno(), "setns failed")
                return
            box["value"] = make()
        except BaseException as error:
            box["error"] = error
        finally:
            os.close(fd)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def _run(*command: str, env: dict[str, str] | None = None, timeout: float = 60) -> None:
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()[-500:]}")


def _wait_for(check: Callable[[], bool], what: str, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise RuntimeError(f"{what} did not come up in {timeout:.0f} s")


@contextlib.contextmanager
def two_nodes(hidden: Path) -> Iterator[TwoNodes]:
    """The cluster, stopped and its namespaces removed however the tests end. `hidden`:
    the folder node B must not see (the driver's temporary files)."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        must_run_here("the cluster tests need root and iproute2 (network namespaces)")
    try:
        import ray  # noqa: F401
    except ImportError:
        must_run_here("the cluster tests need Ray: pip install -e '.[dev]'")
    _remove_stale()
    tag = f"{os.getpid() % 100000}"
    head, node = f"gfr-a{tag}", f"gfr-b{tag}"
    folder = Path(tempfile.mkdtemp(prefix=f"gaffer-cluster-{tag}-", dir="/var/tmp"))
    cluster = TwoNodes(
        head, node, secrets.token_hex(16), folder, folder / "node-b", f"unix://{folder}/b.sock"
    )
    env = {**os.environ, **cluster.env(), "RAY_USAGE_STATS_ENABLED": "0"}
    dockerd = None
    try:
        _namespaces(head, node)
        dockerd = _docker_b(cluster)
        _run(
            *cluster.in_head([RAY, "start", "--head", f"--node-ip-address={HEAD_IP}"]),
            f"--port={GCS_PORT}",
            f"--ray-client-server-port={CLIENT_PORT}",
            "--num-cpus=1",
            "--include-dashboard=false",
            f"--temp-dir={folder}/ray",
            env=env,
            timeout=START_TIMEOUT_S,
        )
        start_b = (
            f"mount -t tmpfs tmpfs {hidden} && exec {RAY} start "
            f"--address={HEAD_IP}:{GCS_PORT} --node-ip-address={NODE_IP} --num-cpus=1 "
            """--resources='{"gaffer_reader": 4, "gaffer_sandbox": 2}'"""
        )
        node_env = {
            **env,
            "DOCKER_HOST": cluster.docker_b,
            "GAFFER_NODE_ROOT": str(cluster.node_root),
        }
        cluster.start_b = ["ip", "netns", "exec", node, "sh", "-c", start_b]
        cluster.env_b = node_env
        _run(*cluster.start_b, env=node_env, timeout=START_TIMEOUT_S)
        yield cluster
    finally:
        for namespace in (node, head):
            listed = subprocess.run(
                ["ip", "netns", "pids", namespace], capture_output=True, text=True
            )
            for pid in listed.stdout.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
        if dockerd is not None:
            dockerd.kill()
            dockerd.wait()
        for namespace in (node, head):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
        subprocess.run(["umount", "-l", f"{folder}/b-data"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def _remove_stale() -> None:
    """Namespaces of an earlier test run that was killed (its pid is gone), and what ran
    in them."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for name in (line.split()[0] for line in listed.splitlines() if line.strip()):
        tag = name.removeprefix("gfr-a").removeprefix("gfr-b")
        if not name.startswith(("gfr-a", "gfr-b")) or not tag.isdigit():
            continue
        if Path(f"/proc/{tag}").exists():
            continue
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
        for pid in pids.stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    for folder in Path("/var/tmp").glob("gaffer-cluster-*-*"):
        tag = folder.name.split("-")[2]
        if tag.isdigit() and not Path(f"/proc/{tag}").exists():
            subprocess.run(["umount", "-l", f"{folder}/b-data"], capture_output=True)
            shutil.rmtree(folder, ignore_errors=True)


def _warm_up(cluster: TwoNodes, env: dict[str, str]) -> None:
    """A first client, so the tests do not pay (or time out on) the head's cold start of
    its client server on a busy machine."""
    join = f"import ray; ray.init({cluster.address!r}, logging_level='ERROR'); ray.shutdown()"
    for attempt in range(3):
        done = subprocess.run(
            cluster.in_head([sys.executable, "-c", join]), capture_output=True, env=env, timeout=180
        )
        if done.returncode == 0:
            return
        time.sleep(2 * (attempt + 1))
    raise RuntimeError(f"no client could join the cluster: {done.stderr.decode()[-500:]}")


def _namespaces(head: str, node: str) -> None:
    veth_a, veth_b = f"{head}v", f"{node}v"
    for command in (
        ["ip", "netns", "add", head],
        ["ip", "netns", "add", node],
        ["ip", "link", "add", veth_a, "type", "veth", "peer", "name", veth_b],
        ["ip", "link", "set", veth_a, "netns", head],
        ["ip", "link", "set", veth_b, "netns", node],
        ["ip", "-n", head, "addr", "add", f"{HEAD_IP}/24", "dev", veth_a],
        ["ip", "-n", node, "addr", "add", f"{NODE_IP}/24", "dev", veth_b],
        ["ip", "-n", head, "link", "set", "lo", "up"],
        ["ip", "-n", node, "link", "set", "lo", "up"],
        ["ip", "-n", head, "link", "set", veth_a, "up"],
        ["ip", "-n", node, "link", "set", veth_b, "up"],
    ):
        _run(*command)


def _docker_b(cluster: TwoNodes) -> subprocess.Popen[bytes]:
    """Node B's own Docker engine, loaded with the sandbox image from the machine's."""
    folder = cluster.folder
    log = (folder / "dockerd-b.log").open("wb")
    # In node B's network namespace (so it never touches the machine's own docker0), but
    # not its mount namespace: `ip netns exec` would hide the cgroup folders dockerd needs.
    dockerd = subprocess.Popen(
        [
            "nsenter", f"--net=/var/run/netns/{cluster.node}",
            "dockerd",
            f"--host={cluster.docker_b}",
            f"--data-root={folder}/b-data",
            f"--exec-root={folder}/b-exec",
            f"--pidfile={folder}/b.pid",
            "--bridge=none",
            "--iptables=false",
            "--ip6tables=false",
            f"--containerd-namespace=gaffer-b{os.getpid()}",
        ],
        stdout=log,
        stderr=log,
    )  # fmt: skip

    def answers() -> bool:
        done = subprocess.run(["docker", "-H", cluster.docker_b, "info"], capture_output=True)
        return done.returncode == 0

    _wait_for(answers, "node B's Docker engine")
    save = subprocess.Popen(["docker", "save", "gaffer-sandbox:latest"], stdout=subprocess.PIPE)
    loaded = subprocess.run(
        ["docker", "-H", cluster.docker_b, "load", "-q"],
        stdin=save.stdout,
        capture_output=True,
        timeout=300,
    )
    save.wait()
    if loaded.returncode != 0:
        raise RuntimeError(f"docker load on node B: {loaded.stderr.decode()[-500:]}")
    return dockerd
