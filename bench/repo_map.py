"""The repo map's cost (workers/repo_map/): building it for this repository and for a
50,000-file tree, the first time (every file read and parsed) and again unchanged (a stat
per file, the rest from its cache), each beside `git ls-files` on the same tree: the
least any tool that lists a repository's files pays."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.common import Row, size
from bench.snapshots import make_tree
from workers.repo_map import index
from workers.repo_map.index import build

ROOT = Path(__file__).resolve().parent.parent
UNCHANGED_TARGET_S = 1.0
"""A run on an unchanged 50,000-file tree: what the snapshot of that tree is held to."""


@contextlib.contextmanager
def own_state() -> Iterator[None]:
    """A state folder of the benchmark's own: a first build is a first build, and the
    user's cache is left alone."""
    before = os.environ.get("XDG_STATE_HOME")
    with tempfile.TemporaryDirectory() as state:
        os.environ["XDG_STATE_HOME"] = state
        try:
            yield
        finally:
            if before is None:
                del os.environ["XDG_STATE_HOME"]
            else:
                os.environ["XDG_STATE_HOME"] = before


def ls_files(root: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["git", "-C", str(root), "ls-files", "-z"], check=True, capture_output=True)
    return time.perf_counter() - started


def measure(root: Path, kind: str, target: bool) -> list[Row]:
    with own_state():
        started = time.perf_counter()
        first = build(root)
        cold = time.perf_counter() - started
        index.forget_parsed()  # a new run is a new process: nothing parsed yet
        started = time.perf_counter()
        again = build(root)
        warm = time.perf_counter() - started
    assert again.files.keys() == first.files.keys()
    listing = ls_files(root)
    return [
        Row(
            f"repo map, {kind} ({len(first.files)} files mapped): first build", round(cold, 2), "s"
        ),
        Row(
            f"repo map, {kind}: unchanged, next run",
            round(warm, 2),
            "s",
            f"≤ {UNCHANGED_TARGET_S:g}" if target else "",
            warm <= UNCHANGED_TARGET_S if target else None,
        ),
        Row(f"git ls-files, {kind}", round(listing, 3), "s"),
        Row(f"repo map unchanged / git ls-files, {kind}", round(warm / max(listing, 1e-6), 1), "x"),
    ]


def run() -> list[Row]:
    rows = measure(ROOT, "this repository", target=False)
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        make_tree(tree, size(50_000, 300))
        subprocess.run(["git", "init", "-q", str(tree)], check=True)
        subprocess.run(["git", "-C", str(tree), "add", "-A"], check=True)
        rows += measure(tree, f"{size(50_000, 300):,}-file tree", target=True)
    return rows
