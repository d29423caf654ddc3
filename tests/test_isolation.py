"""Isolated editors (`--isolate`): each on a git worktree of its own, in parallel; their
change sets come into the workspace all or nothing, and a conflict is reported."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from supervisor.run_changes import agent_changes
from supervisor.run_plan import Ceiling
from tests.test_delegation import delegate, interval, of, run_session, tool_answers
from workers import state
from workers.changes.change_sets import compare
from workers.changes.merging import merge_change_set
from workers.changes.snapshots import Store
from workers.changes.worktrees import make_worktree, reap_worktrees
from workers.model.scripted import Step, call, calls, say
from workers.processes import owner_token

ISOLATED = Ceiling(isolate=True)


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def repository(workspace: Path) -> Path:
    """A repository with a commit, an uncommitted edit and an untracked file."""
    git(workspace, "init", "-q")
    (workspace / "shared.py").write_text("".join(f"line {n}\n" for n in range(1, 21)))
    (workspace / "committed.txt").write_text("as committed\n")
    git(workspace, "add", ".")
    git(workspace, "commit", "-qm", "start")
    (workspace / "committed.txt").write_text("edited, not committed\n")
    (workspace / "untracked.txt").write_text("never added\n")
    return workspace


def copies_left(workspace: Path) -> list[str]:
    folder = state.workspace_dir(workspace, state.WORKTREES)
    return sorted(os.listdir(folder)) if folder.exists() else []


def test_three_isolated_editors_run_together_and_all_land(workspace: Path, tmp_path: Path) -> None:
    repository(workspace)
    tasks = ["write one", "write two", "write three"]
    scripts: dict[str, list[Step]] = {
        "the job": [calls(*(delegate("writer", t) for t in tasks)), say("done")],
        **{
            t: [
                call("read_file", path="untracked.txt"),
                call("write_file", path=f"{t[6:]}.txt", content=t),
                say("wrote"),
            ]
            for t in tasks
        },
    }
    _, records, model = run_session(workspace, tmp_path, scripts, latency=0.3, ceiling=ISOLATED)
    for n in (1, 2, 3):
        assert (workspace / f"{tasks[n - 1][6:]}.txt").read_text() == tasks[n - 1]
    spans = [interval(records, f"w{n}") for n in (1, 2, 3)]
    assert max(start for start, _ in spans) < min(end for _, end in spans), "they took turns"
    # Each copy held the uncommitted and untracked files, and was a worktree of its own.
    for task in tasks:
        assert "never added" in str(model.seen(task)[1][-1]["content"])
    starts = of(records, "agent_start", profile="writer")
    assert len({s["worktree"] for s in starts}) == 3
    assert [m["status"] for m in of(records, "merge")] == ["applied"] * 3
    assert copies_left(workspace) == []
    assert "worktrees" not in git(workspace, "worktree", "list")
    # The uncommitted edit is untouched, and each report says where the change went.
    assert (workspace / "committed.txt").read_text() == "edited, not committed\n"
    answers = tool_answers(model, "the job", 1)
    assert all("its changes are now in the workspace" in a for a in answers)
    # `gaffer undo w2` would put back just what w2 brought in.
    store = Store(workspace)
    (w2,) = agent_changes(records, store, "w2").chosen
    assert [c.label for c in w2.changes] == ["two.txt (added)"]


def two_isolated_edits(
    workspace: Path, tmp_path: Path, first: str, second: str
) -> tuple[list[Any], Any]:
    """Two isolated writers rewrite shared.py at once, to `first` and to `second`; the
    second is a step slower, so the first's change is in the workspace when it ends."""
    scripts: dict[str, list[Step]] = {
        "the job": [
            calls(delegate("writer", "edit first"), delegate("writer", "edit second")),
            say("done"),
        ],
        "edit first": [
            call("read_file", path="shared.py"),
            call("write_file", path="shared.py", content=first),
            say("ok"),
        ],
        "edit second": [
            call("read_file", path="shared.py"),
            call("read_file", path="committed.txt"),
            call("write_file", path="shared.py", content=second),
            say("ok"),
        ],
    }
    _, records, model = run_session(workspace, tmp_path, scripts, latency=0.2, ceiling=ISOLATED)
    return records, model


def test_two_editors_on_the_same_lines_one_lands_one_conflicts(
    workspace: Path, tmp_path: Path
) -> None:
    repository(workspace)
    original = (workspace / "shared.py").read_text()
    first = original.replace("line 5\n", "line five, by the first\n")
    second = original.replace("line 5\n", "line 5, by the second\n")
    records, model = two_isolated_edits(workspace, tmp_path, first, second)
    # Whichever ended first (the first, unless the machine is busy) lands; the other
    # conflicts, and the workspace is exactly as after the one that landed.
    merges = {m["agent_id"]: m for m in of(records, "merge")}
    assert sorted(m["status"] for m in merges.values()) == ["applied", "conflict"]
    landed = next(a for a, m in merges.items() if m["status"] == "applied")
    lost = "w2" if landed == "w1" else "w1"
    assert (workspace / "shared.py").read_text() == (first if landed == "w1" else second)
    (conflict,) = merges[lost]["conflicts"]
    assert conflict["path"] == "shared.py" and "same lines" in conflict["why"]
    assert "line five, by the first" in conflict["hunks"]
    assert "line 5, by the second" in conflict["hunks"]
    ends = {e["child_id"]: e for e in of(records, "delegate_end")}
    assert ends[lost]["status"] == "conflict" and ends[lost]["files_changed"] == []
    report = tool_answers(model, "the job", 1)[int(lost[1:]) - 1]
    mine = "by the second" if lost == "w2" else "by the first"
    assert "NOT applied" in report and "shared.py" in report and mine in report
    assert records and copies_left(workspace) == []
    diff = tmp_path / "logs"
    assert any(p.name == f"{lost}.diff" for p in diff.rglob("*.diff")), "its change set is kept"
    # `gaffer logs` shows both merges, the conflict as such, and credits the change to
    # the workers when the agent above them edits nothing itself.
    from supervisor.runlog import render

    shown = [text.plain.strip() for text in render(records)]
    assert f"⇄ {landed}: applied: shared.py (modified)" in shown, shown
    assert f"⇄ {lost}: NOT applied, conflicts in shared.py" in shown
    assert "✎ changed under supervisor, by its workers: shared.py (modified)" in shown
    assert not any(line.startswith("✎ supervisor changed") for line in shown)


def test_changes_to_different_lines_of_one_file_are_joined(workspace: Path, tmp_path: Path) -> None:
    repository(workspace)
    original = (workspace / "shared.py").read_text()
    top = original.replace("line 2\n", "line 2 (top)\n")
    bottom = original.replace("line 19\n", "line 19 (bottom)\n")
    records, _ = two_isolated_edits(workspace, tmp_path, top, bottom)
    text = (workspace / "shared.py").read_text()
    assert "line 2 (top)\n" in text and "line 19 (bottom)\n" in text
    assert [m["status"] for m in of(records, "merge")] == ["applied", "applied"]


def test_without_isolate_editors_still_take_turns_on_the_workspace(
    workspace: Path, tmp_path: Path
) -> None:
    repository(workspace)
    scripts: dict[str, list[Step]] = {
        "the job": [calls(delegate("writer", "a"), delegate("writer", "b")), say("done")],
        "a": [call("write_file", path="a.txt", content="a"), say("ok")],
        "b": [call("write_file", path="b.txt", content="b"), say("ok")],
    }
    _, records, _ = run_session(workspace, tmp_path, scripts, latency=0.1)
    (_, first_end), (second_start, _) = interval(records, "w1"), interval(records, "w2")
    assert first_end <= second_start
    assert of(records, "merge") == [] and "worktree" not in of(records, "agent_start")[1]


def test_a_change_set_naming_what_the_host_runs_is_refused_whole(workspace: Path) -> None:
    repository(workspace)
    store = Store(workspace)
    _, base = store.snapshot()
    copy = make_worktree(store, "w9")
    (copy.path / "ok.txt").write_text("fine\n")
    (copy.path / ".mcp.json").write_text('{"mcpServers": {}}\n')
    _, after = copy.store.snapshot()
    merged = merge_change_set(store, base, compare(base, after))
    assert merged.status == "conflict"
    assert [c.path for c in merged.conflicts] == [".mcp.json"]
    assert not (workspace / "ok.txt").exists() and not (workspace / ".mcp.json").exists()


def test_copies_of_a_killed_run_are_reaped(workspace: Path) -> None:
    repository(workspace)
    store = Store(workspace)
    copy = make_worktree(store, "w1")
    ended = subprocess.Popen(["true"])
    token = owner_token(ended.pid)
    ended.wait()
    dead = copy.path.with_name(f"{token}-w1")  # its owner has ended
    copy.path.rename(dead)
    git(workspace, "worktree", "repair", str(dead))
    assert dead.name in git(workspace, "worktree", "list")
    # An owner of another PID namespace, or one whose pid is not visible, is not gone.
    unseen = copy.path.with_name("4026531000.999999999.1-w3")
    unseen.mkdir()
    mine = make_worktree(store, "w2")
    assert reap_worktrees(workspace) == [dead.name]
    assert copies_left(workspace) == sorted([unseen.name, mine.path.name])  # those stay
    assert token not in git(workspace, "worktree", "list")


def test_a_plain_copy_sees_its_changes_outside_git_and_before_a_commit(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("plain\n")
    for before_a_commit in (False, True):
        if before_a_commit:
            git(workspace, "init", "-q")  # a repository with no commit: a plain copy too
        store = Store(workspace)
        copy = make_worktree(store, f"w{int(before_a_commit)}")
        assert (copy.path / "notes.txt").read_text() == "plain\n"
        assert not (copy.path / ".git").exists()
        (copy.path / "notes.txt").write_text("changed\n")
        _, after = copy.store.snapshot()
        assert [c.label for c in compare(copy.base, after)] == ["notes.txt (modified)"]
        copy.remove()


@pytest.mark.parametrize(
    "planted",
    [
        [("HEAD", "ref: refs/heads/m\n"), ("objects/x", "x"), ("refs/heads/m", "0")],
        [("HEAD", "ref: refs/heads/m\n"), ("commondir", "../.git\n")],  # git's own test
    ],
    ids=["HEAD objects refs", "HEAD commondir"],
)
def test_a_change_set_that_would_make_a_git_repository_is_refused(
    workspace: Path, planted: list[tuple[str, str]]
) -> None:
    repository(workspace)
    store = Store(workspace)
    _, base = store.snapshot()
    copy = make_worktree(store, "w8")
    for name, text in planted:
        (copy.path / "evil" / name).parent.mkdir(parents=True, exist_ok=True)
        (copy.path / "evil" / name).write_text(text)
    (copy.path / "evil" / "config").write_text("[core]\n\tfsmonitor = touch /tmp/pwned\n")
    _, after = copy.store.snapshot()
    merged = merge_change_set(store, base, compare(base, after))
    assert merged.status == "conflict" and [c.path for c in merged.conflicts] == ["evil"]
    assert not (workspace / "evil").exists()


def test_a_clash_found_before_writing_loses_nothing(workspace: Path) -> None:
    repository(workspace)
    store = Store(workspace)
    _, base = store.snapshot()
    copy = make_worktree(store, "w7")
    (copy.path / "shared.py").write_text("rewritten\n")
    (copy.path / "docs").mkdir()
    (copy.path / "docs" / "index.md").write_text("# docs\n")
    _, after = copy.store.snapshot()
    (workspace / "docs").write_text("a file another editor brought in\n")  # since the copy
    merged = merge_change_set(store, base, compare(base, after))
    assert merged.status == "conflict"
    assert "is a file where a folder is needed" in merged.conflicts[0].why
    assert (workspace / "shared.py").read_text().startswith("line 1")
    assert (workspace / "docs").read_text() == "a file another editor brought in\n"


def test_a_stuck_isolated_editor_lets_its_slot_go_past_its_wall_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading
    import time

    from supervisor import scheduler
    from workers.limits import Budget, Limits

    monkeypatch.setattr(scheduler, "TIMEOUT_GRACE_S", 0.1)
    jobs = scheduler.Scheduler(max_parallel=1)
    stuck = Budget().child(Limits(max_seconds=0.2))
    entered, release = threading.Event(), threading.Event()

    def hold_forever() -> None:
        with jobs.slot("w1", stuck):
            entered.set()
            release.wait(10)  # a worker that ignores its cancellation

    threading.Thread(target=hold_forever, daemon=True).start()
    assert entered.wait(5)
    started = time.monotonic()
    with jobs.slot("w2", Budget().child(Limits(max_seconds=10))):
        waited = time.monotonic() - started
    release.set()
    assert waited < 3, "the stuck editor's slot lapsed"
