"""Run beside a Ray head (in its network namespace) by bench/cluster.py: the Ray path's
steps for one worker, timed, against the same steps on the local path; JSON on stdout."""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from workers.changes.snapshots import Store
from workers.changes.worktrees import make_worktree
from workers.cluster.bundle import make_bundle
from workers.cluster.driver import Cluster
from workers.limits import Budget
from workers.sandbox import docker
from workers.sandbox.host import HostSandbox
from workers.sandbox.options import DockerOptions
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import ToolContext

WORKERS = 4
CALLS = 30


def timed(action: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    value = action()
    return time.perf_counter() - started, value


def call_seconds(sandbox: Any) -> float:
    """The median time of one list_dir call through `sandbox`."""
    tool = BUILTIN_TOOLS["list_dir"]
    args = tool.args.model_validate({"path": "."})
    times = [timed(lambda: sandbox.run(tool, args, Budget(None, 60)))[0] for _ in range(CALLS)]
    return statistics.median(times)


def edit(sandbox: Any) -> None:
    tool = BUILTIN_TOOLS["run_shell"]
    args = tool.args.model_validate({"command": "echo '# touched' >> README.md"})
    sandbox.run(tool, args, Budget(None, 60))


def together(cluster: Cluster, copy: Any) -> float:
    """Wall time for WORKERS readers placed at once (a batch), each making one call."""
    import threading

    def one(n: int) -> None:
        with cluster.hands(
            copy=copy, run_id="bench", agent_id=f"t{n}", in_container=False,
            docker_options={}, uid=None,
        ) as box:  # fmt: skip
            box.run(
                BUILTIN_TOOLS["list_dir"],
                BUILTIN_TOOLS["list_dir"].args.model_validate({}),
                Budget(None, 60),
            )

    started = time.perf_counter()
    threads = [threading.Thread(target=one, args=(n,)) for n in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def main(address: str, workspace: Path) -> None:
    store = Store(workspace)
    out: dict[str, Any] = {}
    out["snapshot_s"], (_, tree) = timed(store.snapshot)
    out["bundle_s"], bundle = timed(lambda: make_bundle(store, tree))
    out["bundle_bytes"] = len(bundle)
    out["files"] = len(tree)
    cluster = Cluster(address)
    out["connect_s"], _ = timed(cluster.connect)
    out["batch_copy_s"], copy = timed(lambda: cluster.copy_of(Store(workspace)))
    readers, checkouts, calls, closes = [], [], [], []
    for n in range(WORKERS):
        started = time.perf_counter()
        with cluster.hands(
            copy=copy, run_id="bench", agent_id=f"r{n}", in_container=False,
            docker_options={}, uid=None,
        ) as box:  # fmt: skip
            readers.append(time.perf_counter() - started)
            checkouts.append(box.placement.checkout_s)
            calls.append(call_seconds(box))
            closing = time.perf_counter()
        closes.append(time.perf_counter() - closing)
    editors, sent_back = [], []
    options = DockerOptions().model_dump()
    for n in range(2):
        started = time.perf_counter()
        with cluster.hands(
            copy=copy, run_id="bench", agent_id=f"e{n}", in_container=True,
            docker_options=options, uid=None,
        ) as box:  # fmt: skip
            editors.append(time.perf_counter() - started)
            edit(box)
            closing = time.perf_counter()
        sent_back.append(time.perf_counter() - closing)
        assert box.sent_back is not None and box.sent_back.changes, "the edit came back"
    out["together_ready_s"] = together(cluster, copy)
    out["reader_ready_s"] = statistics.median(readers)
    out["reader_checkout_s"] = statistics.median(checkouts)
    out["reader_close_s"] = statistics.median(closes)
    out["remote_call_s"] = statistics.median(calls)
    out["editor_ready_s"] = statistics.median(editors)
    out["editor_finish_s"] = statistics.median(sent_back)
    cluster.shutdown()

    out["local_call_s"] = call_seconds(HostSandbox(ToolContext(workspace)))
    local_docker = []
    for n in range(2):
        started = time.perf_counter()
        with docker.docker_sandbox(
            workspace, DockerOptions(), run_id="bench", agent_id=f"l{n}"
        ) as box:  # fmt: skip
            local_docker.append(time.perf_counter() - started)
            edit(box)
    out["local_docker_ready_s"] = statistics.median(local_docker)
    worktrees = []
    for n in range(WORKERS):
        seconds, copy_here = timed(lambda n=n: make_worktree(store, f"b{n}"))
        worktrees.append(seconds + timed(copy_here.remove)[0])
    out["local_worktree_s"] = statistics.median(worktrees)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
