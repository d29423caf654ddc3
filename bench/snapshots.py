"""Snapshots and change sets on a 50,000-file tree (workers/changes/snapshots.py).

The tree: 500 folders of 100 small source files, their times an hour back as in any
checkout. Measured: the first snapshot (every file hashed and kept), a new run's
snapshot of the unchanged tree (the stat cache read from disk), a snapshot after one
call changed one file, and the change set of that call, each as a plain folder and as
a git repository (the files listed by `git ls-files`). Then a repository of 10,000 source
files beside an ignored `node_modules` of 40,000: a new run's snapshot, the look at the
ignored files an editing agent makes when it starts and again when it ends
(workers/changes/ignored_changes.py), and an editor's start and end all told.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import Row, size
from workers.changes import ignored_changes, snapshots
from workers.changes.change_sets import compare
from workers.changes.snapshots import Store
from workers.changes.tracker import ChangeTracker

PER_FOLDER = 100
UNCHANGED_TARGET_S = 1.0
# An editor's start and end, change set and ignored files together, on that tree.
EDITOR_TARGET_S = 2.0


def files() -> int:
    return size(50_000, 300)


def ignored() -> int:
    return size(40_000, 200)


def make_tree(root: Path, count: int | None = None, top: str = "pkg") -> None:
    count = files() if count is None else count
    past = time.time() - 3600
    for n in range(count):
        folder = root / f"{top}{n // PER_FOLDER:03d}"
        if n % PER_FOLDER == 0:
            folder.mkdir(parents=True)
        path = folder / f"mod{n % PER_FOLDER:03d}.py"
        path.write_text(f"# module {n}\ndef f{n}(x):\n    return x + {n}\n")
        os.utime(path, (past, past))


def timed(job: object) -> tuple[float, object]:
    started = time.perf_counter()
    value = job()  # type: ignore[operator]
    return time.perf_counter() - started, value


def measure(root: Path, kind: str) -> list[Row]:
    # A checkout is older than the racy window: files changed within it are hashed again
    # (their ctime is now, whatever utime set), which is the right thing and not measured here.
    time.sleep(snapshots.RACY_NS / 1e9 + 0.1)
    first, _ = timed(lambda: Store(root).snapshot())
    unchanged, _ = timed(lambda: Store(root).snapshot())
    store = Store(root)
    _, before = store.snapshot()
    target = root / "pkg001" / "mod045.py"
    target.write_text("# changed by a call\n")
    after_call, after = timed(store.scan)
    diffing, changes = timed(lambda: compare(before, after))  # type: ignore[arg-type]
    assert [c.path for c in changes] == ["pkg001/mod045.py"]  # type: ignore[attr-defined]
    return [
        Row(f"snapshot, {kind}: first (hash and keep all)", round(first, 2), "s"),
        Row(
            f"snapshot, {kind}: unchanged tree, new run",
            round(unchanged, 2),
            "s",
            f"≤ {UNCHANGED_TARGET_S:g}",
            unchanged <= UNCHANGED_TARGET_S,
        ),
        Row(f"snapshot, {kind}: after a call changed 1 file", round(after_call, 2), "s"),
        Row(f"change set of that call ({files()} files)", round(diffing, 3), "s"),
    ]


def measure_ignored(root: Path) -> list[Row]:
    make_tree(root, files() - ignored())
    make_tree(root / "node_modules", ignored(), "dep")
    (root / ".gitignore").write_text("node_modules/\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    time.sleep(snapshots.RACY_NS / 1e9 + 0.1)
    Store(root).snapshot()
    unchanged, (_, tree) = timed(lambda: Store(root).snapshot())  # type: ignore[misc]
    looking, seen = timed(lambda: ignored_changes.look(root, tree))  # type: ignore[arg-type]
    assert len(seen) == ignored()  # type: ignore[arg-type]

    def editor() -> None:
        tracker = ChangeTracker(Store(root))
        tracker.finish()

    whole, _ = timed(editor)
    kind = f"repository + {ignored()} ignored"
    return [
        Row(
            f"snapshot, {kind}: unchanged, new run",
            round(unchanged, 2),
            "s",
            f"≤ {UNCHANGED_TARGET_S:g}",
            unchanged <= UNCHANGED_TARGET_S,
        ),
        Row(f"look at the {ignored()} ignored files (start or end)", round(looking, 2), "s"),
        Row(
            f"an editor's start and end, {kind}",
            round(whole, 2),
            "s",
            f"≤ {EDITOR_TARGET_S:g}",
            whole <= EDITOR_TARGET_S,
        ),
    ]


def run() -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "plain"
        make_tree(plain)
        rows += measure(plain, "folder")
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        make_tree(repo)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
        rows += measure(repo, "git repository")
    with tempfile.TemporaryDirectory() as tmp:
        rows += measure_ignored(Path(tmp) / "ignored")
    return rows
