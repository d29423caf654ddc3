"""Workers on a Ray cluster (`--cluster`), through the real CLI: a two-node cluster of
the tests' own (tests/ray_cluster.py), the driver beside the head with a scripted model,
the workers' tools on node B with its own Docker engine and its own disk."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docker_support import chown_tree, require_docker, user_workspace
from tests.fake_openai import FakeOpenAI, Reply
from tests.helpers import cli_env, gaffer
from tests.ray_cluster import NODE_IP, TwoNodes, in_namespace, two_nodes
from workers import state
from workers.cluster import driver
from workers.sandbox import SandboxUnavailable


def delegate(profile: str, task: str) -> tuple[str, str]:
    return ("delegate", json.dumps({"profile": profile, "task": task}))


def call(name: str, **args: Any) -> Reply:
    return Reply(tool_calls=[(name, json.dumps(args))])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoNodes]:
    require_docker()
    with two_nodes(hidden=tmp_path_factory.getbasetemp().parent) as nodes:
        yield nodes


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = user_workspace(tmp_path / "ws")
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(
            ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c", "safe.directory=*", *args],
            cwd=workspace,
            check=True,
        )
    (workspace / "app.py").write_text("def greet():\n    return 'hi'\n")
    (workspace / "notes.md").write_text("uncommitted notes, only on the driver's disk\n")
    chown_tree(workspace)
    return workspace


def run_on_cluster(
    cluster: TwoNodes,
    workspace: Path,
    *args: str,
    replies: list[Reply],
    routes: dict[str, list[Reply]],
    while_running: Any = None,
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """`gaffer ARGS --cluster …` run beside the head, against a scripted model there."""
    server = in_namespace(cluster.head, lambda: FakeOpenAI(replies, routes))
    with server:
        env = cli_env(workspace, server, cluster.env())
        command = cluster.in_head(
            [sys.executable, "-m", "supervisor", *args, "--cluster", cluster.address]
        )
        process = subprocess.Popen(
            command,
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if while_running is not None:
            threading.Thread(target=while_running, args=(server,), daemon=True).start()
        stdout, stderr = process.communicate(timeout=300)
    done = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    [log] = sorted((workspace.parent / "logs").glob("*.jsonl"))
    return done, [json.loads(line) for line in log.read_text().splitlines()]


def test_without_ray_the_flag_says_what_to_install(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    blocker = tmp_path / "no_ray"
    (blocker / "ray").mkdir(parents=True)
    (blocker / "ray" / "__init__.py").write_text("raise ImportError('no ray here')\n")
    env = {"PYTHONPATH": str(blocker), "OPENAI_API_KEY": "sk-x"}
    done = gaffer(workspace, "run", "--cluster", "ray://127.0.0.1:1", "hi", env=env)
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith("the Ray backend needs Ray: pip install 'gaffer[ray]' (or ray[client]>=2.52)")
    )


class RayStandIn:
    """The few calls Cluster.connect makes of `ray`, failing `init` as a busy head's client
    proxy does, `failures` times."""

    def __init__(self, failures: int) -> None:
        self.failures, self.inits, self.shutdowns = failures, 0, 0

    def init(self, address: str, **_options: object) -> None:
        self.inits += 1
        if self.inits <= self.failures:
            raise RuntimeError(
                "Starting Ray client server failed. See ray_client_server_23000.err for "
                "detailed logs."
            )

    def shutdown(self) -> None:
        self.shutdowns += 1

    def remote(self, cls: type) -> type:
        return cls


def test_a_client_server_that_did_not_start_is_tried_once_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAY_AUTH_TOKEN", "t" * 32)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # connect sets both: put back after
    monkeypatch.setattr(driver, "CONNECT_RETRY_S", 0.0)
    with socket.create_server(("127.0.0.1", 0)) as listening:  # the client server's port
        cluster = driver.Cluster(f"ray://127.0.0.1:{listening.getsockname()[1]}")
        cluster._ray = once = RayStandIn(failures=1)
        cluster.connect()
        assert (once.inits, once.shutdowns) == (2, 1)

        cluster._ray = always = RayStandIn(failures=5)
        with pytest.raises(SandboxUnavailable, match="Starting Ray client server failed"):
            cluster.connect()
    assert always.inits == driver.CONNECT_TRIES, "then it says why, in one line"


def test_a_closed_cluster_port_is_said_in_seconds(workspace: Path) -> None:
    """Nothing listens at the address: one line saying so, not a wait and a token hint."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]  # free once closed: nothing listens there after
    env = {"RAY_AUTH_TOKEN": "t" * 32}
    with FakeOpenAI([]) as server:
        started = time.monotonic()
        address = f"ray://127.0.0.1:{port}"
        done = gaffer(workspace, "run", "--cluster", address, "hello", server=server, env=env)
        took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert took < 15, f"said within seconds (took {took:.0f} s)"
    assert f"ray://127.0.0.1:{port}: nothing is listening there (connection refused)" in done.stderr
    assert "token" not in done.stderr


def cluster_status(cluster: TwoNodes, ws: Path, token: str) -> subprocess.CompletedProcess[str]:
    """`gaffer cluster status` beside the head, the cluster named by GAFFER_RAY_ADDRESS."""
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "GAFFER_RAY_ADDRESS": cluster.address}
    return subprocess.run(
        cluster.in_head([sys.executable, "-m", "supervisor", "cluster", "status"]),
        cwd=ws,
        env=cli_env(ws, None, env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cluster_status_shows_each_node_its_slots_and_image(cluster: TwoNodes, ws: Path) -> None:
    done = cluster_status(cluster, ws, cluster.token)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()[1:]}
    assert rows[NODE_IP].split()[1:4] == ["alive", "4/4", "2/2"] and rows[NODE_IP].endswith("ready")
    assert rows["10.213.0.1"].split()[2:5] == ["0/0", "0/0", "-"]


@pytest.mark.parametrize("source", ["RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "~/.ray/auth_token"])
def test_the_token_from_each_of_ray_s_sources_joins_with_no_auth_mode_set(
    cluster: TwoNodes, ws: Path, source: str
) -> None:
    """Ray reads RAY_AUTH_MODE as it is imported; gaffer sets it before, from whichever
    source the token is in, so a user sets the token only."""
    env = cli_env(ws, None, {"GAFFER_RAY_ADDRESS": cluster.address})
    for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(key, None)
    home = Path(env["HOME"])
    if source == "RAY_AUTH_TOKEN":
        env["RAY_AUTH_TOKEN"] = cluster.token
    elif source == "RAY_AUTH_TOKEN_PATH":
        (home / "token").parent.mkdir(parents=True, exist_ok=True)
        (home / "token").write_text(cluster.token + "\n")
        env["RAY_AUTH_TOKEN_PATH"] = str(home / "token")
    else:
        (home / ".ray").mkdir(parents=True, exist_ok=True)
        (home / ".ray" / "auth_token").write_text(cluster.token)
    done = subprocess.run(
        cluster.in_head([sys.executable, "-m", "supervisor", "cluster", "status"]),
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert NODE_IP in done.stdout


def test_a_wrong_token_is_refused_in_one_line(cluster: TwoNodes, ws: Path) -> None:
    done = cluster_status(cluster, ws, "not-the-clusters-token")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert "cannot join the Ray cluster" in done.stderr and "token" in done.stderr


def test_a_survey_runs_its_explorers_on_node_b(cluster: TwoNodes, ws: Path) -> None:
    replies = [
        Reply(tool_calls=[delegate("explorer", "read the notes"), delegate("explorer", "list")]),
        Reply(text="The notes are uncommitted; app.py greets."),
    ]
    routes = {
        "read the notes": [
            call("read_file", path="notes.md"),
            Reply(text="They say: uncommitted."),
        ],
        "list": [call("list_dir", path="."), Reply(text="app.py and notes.md.")],
    }
    done, lines = run_on_cluster(
        cluster, ws, "run", "--read-only", "survey it", replies=replies, routes=routes
    )
    assert done.returncode == 0, done.stderr
    for worker in ("w1", "w2"):
        own = [r for r in lines if r.get("agent_id") == worker]
        assert own and all(r["node"].startswith(f"{NODE_IP} ") for r in own), "ran on node B"
    read = next(r for r in lines if r["event"] == "tool_call" and r["name"] == "read_file")
    assert not read["is_error"] and read["sandbox"] == "host"
    # The node's checkout held the uncommitted file, from the bundle, not from this disk.
    supervisor_view = [r for r in lines if r["event"] == "tool_call" and r["name"] == "delegate"]
    assert all(not r["is_error"] for r in supervisor_view)
    assert not list(cluster.node_root.glob("*/workspace")), "node B's checkouts are removed"


def test_a_coder_on_node_b_edits_in_its_own_container_and_the_change_lands(
    cluster: TwoNodes, ws: Path
) -> None:
    replies = [
        Reply(tool_calls=[delegate("coder", "make greet say bye")]),
        Reply(text="It says bye now."),
    ]
    routes = {
        "make greet say bye": [
            call("run_shell", command="sed -i s/hi/bye/ app.py && git status --short"),
            Reply(text="Done: greet returns bye."),
        ]
    }
    done, lines = run_on_cluster(
        cluster, ws, "run", "--no-verify", "the chore", replies=replies, routes=routes
    )
    assert done.returncode == 0, done.stderr
    assert (ws / "app.py").read_text() == "def greet():\n    return 'bye'\n"
    shell = next(r for r in lines if r["event"] == "tool_call" and r["name"] == "run_shell")
    assert shell["sandbox"] == "docker" and shell["node"].startswith(NODE_IP)
    (merge,) = [r for r in lines if r["event"] == "merge"]
    assert merge["status"] == "applied" and [f["path"] for f in merge["files"]] == ["app.py"]
    assert merge["node"].startswith(f"{NODE_IP} "), "the merge line says where the change was made"
    assert cluster.containers_on_b() == [], "its container is gone"
    undone = gaffer(ws, "undo", "--yes", "--agent", "w1")
    assert undone.returncode == 0, undone.stderr
    assert (ws / "app.py").read_text() == "def greet():\n    return 'hi'\n"
    assert not any(state.workspace_dir(ws, state.WORKTREES).iterdir())


def test_node_b_lost_mid_worker_ends_it_interrupted_and_is_swept_when_back(
    cluster: TwoNodes, ws: Path
) -> None:
    """A coder's node dies under it: the worker ends interrupted, naming the node; its
    container and checkout stay on the node while its Ray is down, and go as soon as it
    is back, with no worker placed there."""
    replies = [
        Reply(tool_calls=[delegate("coder", "look twice")]),
        Reply(text="The worker's node was lost."),
    ]
    routes = {
        "look twice": [
            call("run_shell", command="ls"),
            # Node B is killed while the model thinks; the next call finds it gone.
            Reply(delay=3.0, tool_calls=[("run_shell", json.dumps({"command": "cat app.py"}))]),
            Reply(text="never reached"),
        ]
    }

    def kill_b_at_the_second_step(server: FakeOpenAI) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if sum("look twice" in json.dumps(r["messages"][1:2]) for r in server.requests) >= 2:
                cluster.kill_node_b()
                return
            time.sleep(0.05)

    started = time.monotonic()
    done, lines = run_on_cluster(
        cluster,
        ws,
        "run",
        "--no-verify",
        "look",
        replies=replies,
        routes=routes,
        while_running=kill_b_at_the_second_step,
    )
    assert time.monotonic() - started < 150
    assert done.returncode == 3, "answered, but its worker was lost: " + done.stderr
    (end,) = [r for r in lines if r["event"] == "delegate_end"]
    assert end["status"] == "interrupted"
    assert f"node {NODE_IP}" in end["reason"] and "was lost" in end["reason"]
    assert not any(state.workspace_dir(ws, state.WORKTREES).iterdir())
    assert cluster.containers_on_b() and cluster.checkouts_on_b(), "left while B is down"

    cluster.restart_node_b()
    deadline = time.monotonic() + 120
    while (cluster.containers_on_b() or cluster.checkouts_on_b()) and time.monotonic() < deadline:
        time.sleep(1)
    assert cluster.containers_on_b() == [], "its container was swept when B came back"
    assert cluster.checkouts_on_b() == [], "and its checkout"
