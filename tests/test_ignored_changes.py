"""Every byte a sandboxed worker writes is seen, git-ignored files and caches included
(workers/changes/ignored_changes.py): in the report, `gaffer diff` and the log, in a section of
their own, and `gaffer undo` takes back what the run added."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.docker_support import require_docker, user_workspace
from tests.fake_openai import Reply
from tests.helpers import gaffer, gaffer_replying, git_status, shell_reply
from workers.changes.snapshots import Store
from workers.changes.tracker import ChangeTracker, record_change_set
from workers.log.events import Emitter, Recorder


def project(ws: Path) -> Path:
    (ws / ".gitignore").write_text("build/\n*.log\nnode_modules/\n.pytest_cache/\n.tox/\n")
    (ws / "app.py").write_text("x = 1\n")
    (ws / "node_modules" / "left").mkdir(parents=True)
    (ws / "node_modules" / "left" / "index.js").write_text("module.exports = 1\n")
    (ws / ".tox").mkdir()
    (ws / ".tox" / "left.txt").write_text("left\n")
    (ws / "old.log").write_text("old\n")
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    return ws


def test_ignored_files_are_a_section_of_their_own_never_the_change_set(workspace: Path) -> None:
    project(workspace)
    tracker = ChangeTracker(Store(workspace), workspace.parent / "w1.diff")
    tracker.call_starts()  # one call of the agent's makes all of these
    (workspace / "build").mkdir()
    (workspace / "build" / "gen.py").write_text("import os\n")
    (workspace / "node_modules" / "left" / "index.js").write_text("module.exports = 2\n")
    (workspace / "old.log").unlink()
    (workspace / "app.py").write_text("x = 2\n")
    tracker.changed_by_call()
    recorder = Recorder()
    changes = record_change_set(tracker, Emitter([recorder]))
    assert [c.path for c in changes or []] == ["app.py"]
    [line] = [r for r in recorder.records if r["event"] == "change_set"]
    assert [(c["path"], c["change"]) for c in line["ignored"]] == [
        ("build/gen.py", "added"),
        ("node_modules/left/index.js", "modified"),
        ("old.log", "deleted"),
    ]
    diff = (workspace.parent / "w1.diff").read_text()
    assert "+x = 2" in diff and "#   build/gen.py (added, 10 bytes)" in diff


def test_nothing_changed_among_ignored_files_adds_nothing(workspace: Path) -> None:
    project(workspace)
    tracker = ChangeTracker(Store(workspace))
    recorder = Recorder()
    record_change_set(tracker, Emitter([recorder]))
    [line] = [r for r in recorder.records if r["event"] == "change_set"]
    assert "ignored" not in line


def test_a_worker_s_ignored_writes_are_reported_shown_and_undone(tmp_path: Path) -> None:
    require_docker()
    ws = tmp_path / "ws"
    ws.mkdir()
    user_workspace(project(ws))
    plant = "mkdir -p .pytest_cache/v && echo 'x' > .pytest_cache/v/evil && echo x >> .tox/left.txt"
    replies = [shell_reply(plant), Reply(text="done")]
    done, server = gaffer_replying(
        ws, "run", "--no-verify", "go", replies=[*_delegated(replies)], routes={"plant": replies}
    )
    assert done.returncode == 0, done.stderr
    report = next(m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool")
    # What git ignores and the container made never lands (workers/sandbox/landing.py).
    assert "moved aside by gaffer: .pytest_cache (a folder it made, of 1 file(s): git" in report
    assert not (ws / ".pytest_cache").exists()
    # Its change set was taken as the worker ended, before its container's sweep.
    assert "git-ignored and cache files changed: .pytest_cache/v/evil (added" in report
    assert ".tox/left.txt (modified" in report
    # Changed though ignored: moved aside too, its new content kept with the line to take it.
    assert "moved aside by gaffer: .tox/left.txt (git ignores it" in report
    assert not (ws / ".tox" / "left.txt").exists()
    shown = gaffer(ws, "diff")
    assert "#   .tox/left.txt (deleted" in shown.stdout, "the run's own section says so"
    undone = gaffer(ws, "undo", "--yes")
    assert "not put back: .tox/left.txt (deleted" in undone.stdout
    assert ".tox" not in git_status(ws), "git itself never shows them"


def _delegated(worker: list[Reply]) -> list[Reply]:
    call = json.dumps({"profile": "coder", "task": "plant it"})
    return [Reply(tool_calls=[("delegate", call)]), Reply(text="it is done")]


@pytest.fixture(autouse=True)
def _no_pager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_PAGER", "cat")


def test_undo_never_removes_through_a_folder_swapped_for_a_link(
    workspace: Path, outside: Path
) -> None:
    from workers.changes.ignored_changes import IgnoredChange, undo_added

    victim = outside / "secret.txt"
    info = victim.stat()
    (workspace / "build").symlink_to(outside)  # where build/ was when the run added to it
    added = IgnoredChange("build/secret.txt", "added", info.st_size, info.st_mtime_ns)
    escaping = IgnoredChange("../outside/secret.txt", "added", info.st_size, info.st_mtime_ns)
    removed, left = undo_added(workspace, [added, escaping])
    assert removed == [] and victim.exists()
    assert left == [
        "build/secret.txt (build/secret.txt lies under a link (build))",
        "'../outside/secret.txt' (not a path inside the workspace)",
    ]


def test_a_planted_log_cannot_make_undo_remove_a_file_of_yours(workspace: Path) -> None:
    """A log names files by size and mtime, which anyone can read; without the ctime and
    inode the run itself saw, or for a file git or gaffer reads, nothing is removed."""
    from workers.changes.ignored_changes import IgnoredChange, undo_added

    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    config, source = workspace / ".git" / "config", workspace / "app.py"
    source.write_text("x = 1\n")
    planted = [
        IgnoredChange(".git/config", "added", config.stat().st_size, config.stat().st_mtime_ns),
        IgnoredChange("app.py", "added", source.stat().st_size, source.stat().st_mtime_ns),
    ]
    info = config.stat()
    exact = IgnoredChange(
        ".git/config", "added", info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino
    )
    removed, left = undo_added(workspace, [*planted, exact])
    assert removed == [] and config.exists() and source.exists()
    assert "app.py (an older log that does not say which file it was)" in left
    assert len(left) == 3


def test_an_ignored_file_s_name_cannot_add_lines_to_a_diff(workspace: Path) -> None:
    """A name with newlines that spell a patch is written quoted, on one line."""
    from workers.changes.ignored_changes import IgnoredChange, section

    name = "node_modules/x\ndiff --git a/evil b/evil\n+++ b/evil\n@@ -0,0 +1 @@\n+pwned"
    text = section([IgnoredChange(name, "added", 1, 1, 1, 1)])
    assert len(text.splitlines()) == 2 and all(line.startswith("#") for line in text.splitlines())
