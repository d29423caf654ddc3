"""The Ray path's overhead per worker against the local path (issue 16), on the tests'
two-node cluster (tests/ray_cluster.py): the workspace's bundle, a worker's placement and
checkout on node B, a tool call's round trip, an editor's container there and its change
set back; and on this machine, the same steps without the cluster."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import Row

USER_UID = 1000


def _workspace(root: Path) -> Path:
    """A copy of this repository's tracked files: a real project's size and shape."""
    source = Path(__file__).resolve().parent.parent
    listed = subprocess.run(
        ["git", "-c", "safe.directory=*", "ls-files", "-z"],
        cwd=source,
        capture_output=True,
        check=True,
    )
    workspace = root / "ws"
    for name in filter(None, listed.stdout.decode().split("\0")):
        target = workspace / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (source / name).is_file():
            shutil.copy2(source / name, target)
    for folder, dirs, files in os.walk(workspace):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(folder, name), USER_UID, USER_UID)
    os.lchown(workspace, USER_UID, USER_UID)
    return workspace


def run() -> list[Row]:
    from tests.ray_cluster import two_nodes

    if os.geteuid() != 0 or not shutil.which("ip"):
        return [Row("cluster: skipped (needs root and iproute2)", 0, "")]
    with tempfile.TemporaryDirectory(prefix="gaffer-bench-cluster-") as tmp:
        workspace = _workspace(Path(tmp))
        with two_nodes(hidden=Path(tmp)) as cluster:
            done = subprocess.run(
                cluster.in_head(
                    [sys.executable, "-m", "bench.cluster_probe", cluster.address, str(workspace)]
                ),
                capture_output=True,
                text=True,
                env={**os.environ, **cluster.env()},
                timeout=900,
            )
        if done.returncode != 0:
            raise RuntimeError(f"the cluster probe failed: {done.stderr[-2000:]}")
    m = json.loads(done.stdout.strip().splitlines()[-1])
    reader_overhead = m["reader_ready_s"] + m["reader_close_s"]
    editor_overhead = m["editor_ready_s"] + m["editor_finish_s"] - m["local_docker_ready_s"]
    return [
        Row("cluster: files / bundle size", m["files"], "files"),
        Row("cluster: bundle size", round(m["bundle_bytes"] / 1e6, 3), "MB"),
        Row("cluster: snapshot + bundle + put, once per batch", round(m["batch_copy_s"], 3), "s"),
        Row("cluster: of which git bundle", round(m["bundle_s"], 3), "s"),
        Row("cluster: reader placed + checked out", round(m["reader_ready_s"], 3), "s"),
        Row("cluster: of which checkout on the node", round(m["reader_checkout_s"], 3), "s"),
        Row("cluster: reader closed", round(m["reader_close_s"], 3), "s"),
        Row("cluster: 4 readers placed at once, wall", round(m["together_ready_s"], 3), "s"),
        Row("cluster: editor placed + checkout + container", round(m["editor_ready_s"], 3), "s"),
        Row("local: editor's container", round(m["local_docker_ready_s"], 3), "s"),
        Row("cluster: editor's change set back + close", round(m["editor_finish_s"], 3), "s"),
        Row(
            "local: isolated editor's worktree made + removed", round(m["local_worktree_s"], 3), "s"
        ),
        Row("cluster: tool call round trip", round(m["remote_call_s"] * 1000, 2), "ms"),
        Row("local: tool call (host)", round(m["local_call_s"] * 1000, 3), "ms"),
        Row("cluster: overhead per reader worker", round(reader_overhead, 3), "s"),
        Row("cluster: overhead per editor over local docker", round(editor_overhead, 3), "s"),
    ]


if __name__ == "__main__":
    for row in run():
        print(f"{row.name}: {row.value} {row.unit}")
