"""What was undone stays known: `gaffer diff` marks it, a later undo of the whole run
puts back only the rest, and the chat's `/diff` and `/undo` do the same per turn. The
record of undos lives in gaffer's state folder, where the workspace cannot forge it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fake_openai import FakeOpenAI, Reply
from tests.helpers import add_host_coder, gaffer, gaffer_replying
from workers import state
from workers.changes.snapshots import Store
from workers.changes.undone import RECORD, undone


def write(path: str, content: str) -> Reply:
    return Reply(tool_calls=[("write_file", json.dumps({"path": path, "content": content}))])


def read(path: str) -> Reply:
    return Reply(tool_calls=[("read_file", json.dumps({"path": path}))])


def delegate(task: str) -> tuple[str, str]:
    return ("delegate", json.dumps({"profile": "hostcoder", "task": task}))


def two_workers_run(ws: Path) -> None:
    add_host_coder(ws)
    (ws / "a.txt").write_text("a0\n")
    (ws / "b.txt").write_text("b0\n")
    replies = [
        Reply(tool_calls=[delegate("edit a"), delegate("edit b")]),
        Reply(text="Both changed."),
    ]
    routes = {
        "edit a": [read("a.txt"), write("a.txt", "a1\n"), Reply(text="Changed a.")],
        "edit b": [read("b.txt"), write("b.txt", "b1\n"), Reply(text="Changed b.")],
    }
    done, _ = gaffer_replying(
        ws, "run", "--no-verify", "update both files", replies=replies, routes=routes
    )
    assert done.returncode == 0, done.stderr
    assert (ws / "a.txt").read_text() == "a1\n" and (ws / "b.txt").read_text() == "b1\n"


def test_diff_marks_an_undone_worker_and_the_run_s_undo_puts_back_the_rest(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    two_workers_run(ws)

    one = gaffer(ws, "undo", "--yes", "--agent", "w2")
    assert one.returncode == 0, one.stderr
    assert (ws / "b.txt").read_text() == "b0\n" and (ws / "a.txt").read_text() == "a1\n"

    shown = gaffer(ws, "diff")
    assert shown.returncode == 0, shown.stderr
    live, _, marked = shown.stdout.partition("# UNDONE at ")
    assert "+a1" in live and "b.txt" not in live
    assert "(gaffer undo), no longer in the workspace: w2" in marked
    assert "# +b1" in marked and "# -b0" in marked
    assert "w2: undone at" in shown.stderr
    # What is marked is behind '# ': the whole is still a patch of what is in effect.
    patch = tmp_path / "run.patch"
    patch.write_text(shown.stdout)
    check = subprocess.run(["git", "-C", str(ws), "apply", "-R", "--check", str(patch)])
    assert check.returncode == 0

    rest = gaffer(ws, "undo", "--yes")
    assert rest.returncode == 0, rest.stderr
    assert "undone: a.txt" in rest.stdout and "b.txt" not in rest.stdout
    assert (ws / "a.txt").read_text() == "a0\n" and (ws / "b.txt").read_text() == "b0\n"

    again = gaffer(ws, "undo", "--yes")
    assert again.returncode == 1 and "undone already" in again.stderr
    both = gaffer(ws, "diff")
    assert both.stdout.startswith("# UNDONE at ") and "# +a1" in both.stdout
    assert "no longer in the workspace: supervisor" in both.stdout


def test_a_record_of_undos_planted_or_damaged_is_no_record(tmp_path: Path) -> None:
    """The record is read without following a link, and a damaged line is skipped."""
    ws = tmp_path / "ws"
    ws.mkdir()
    store = Store(ws)
    (store.folder / RECORD).write_text('{"key": "r/w1/0", "at": 1.5}\nnot json\n{"key": 3}\n')
    assert undone(store) == {"r/w1/0": 1.5}
    (store.folder / RECORD).unlink()
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text('{"key": "r/w1/0", "at": 1.5}\n')
    (store.folder / RECORD).symlink_to(elsewhere)
    with pytest.raises(OSError):
        undone(store)
    assert state.root_path() in store.folder.parents


def test_gaffer_diff_says_so_when_its_record_of_undos_is_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    two_workers_run(ws)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # as tests.helpers.gaffer runs it
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    record = Store(ws).folder / RECORD
    record.symlink_to(tmp_path / "elsewhere.jsonl")
    shown = gaffer(ws, "diff")
    assert shown.returncode == 1 and "record of undos" in shown.stderr
    assert shown.stderr.count("\n") == 1


def test_chat_diff_and_undo_work_turn_by_turn(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    add_host_coder(ws)
    (ws / "a.txt").write_text("a0\n")
    replies = [
        read("a.txt"),
        write("a.txt", "a1\n"),
        Reply(text="Changed a."),
        write("b.txt", "new\n"),
        Reply(text="Made b."),
    ]
    lines = ["change a", "make b", "/diff", "/undo", "/diff", "/undo all", "/undo", "/exit"]
    with FakeOpenAI(replies) as server:
        done = gaffer(
            ws,
            "chat",
            "--no-verify",
            "--profile",
            "hostcoder",
            server=server,
            stdin="\n".join(lines) + "\n",
        )
    assert done.returncode == 0, done.stderr
    said = done.stderr
    first_diff, _, after = said.partition("undone: b.txt")
    assert "+a1" in first_diff and "+new" in first_diff
    assert "undone: a.txt" in after and "# UNDONE at " in after
    assert "undone already" in after
    assert (ws / "a.txt").read_text() == "a0\n" and not (ws / "b.txt").exists()


def test_a_log_that_copies_a_real_run_s_names_cannot_mark_it_undone(tmp_path: Path) -> None:
    """A second run's log rewritten to carry the first run's session id: undoing it puts
    back its own change and leaves the first run shown, and undoable, as it was."""
    ws = tmp_path / "ws"
    ws.mkdir()
    two_workers_run(ws)
    replies = [Reply(tool_calls=[delegate("make d")]), Reply(text="Made d.")]
    routes = {"make d": [write("decoy.txt", "d\n"), Reply(text="Made it.")]}
    done, _ = gaffer_replying(ws, "run", "--no-verify", "a decoy", replies=replies, routes=routes)
    assert done.returncode == 0, done.stderr
    # Both runs may start in one second: told apart by their task, not their names' order.
    logs = (tmp_path / "logs").glob("*.jsonl")
    first, second = sorted(logs, key=lambda log: "a decoy" in log.read_text())
    real_id = json.loads(first.read_text().splitlines()[0])["session_id"]
    lines = [json.loads(line) for line in second.read_text().splitlines()]
    second.write_text("".join(json.dumps({**r, "session_id": real_id}) + "\n" for r in lines))

    decoy = gaffer(ws, "undo", "--yes", second.stem)
    assert decoy.returncode == 0 and "undone: decoy.txt" in decoy.stdout, decoy.stderr
    shown = gaffer(ws, "diff", first.stem)
    assert "# UNDONE" not in shown.stdout and "+a1" in shown.stdout
    real = gaffer(ws, "undo", "--yes", first.stem)
    assert real.returncode == 0, real.stderr
    assert (ws / "a.txt").read_text() == "a0\n" and (ws / "b.txt").read_text() == "b0\n"


def test_agent_ids_from_a_log_cannot_add_lines_to_the_diff(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    two_workers_run(ws)
    (log,) = (tmp_path / "logs").glob("*.jsonl")
    forged = "w2\ndiff --git a/evil b/evil\n+++ b/evil\n@@ -0,0 +1 @@\n+pwned"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    for record in lines:
        for field in ("agent_id", "parent_id", "child_id"):
            if record.get(field) == "w2":
                record[field] = forged
    log.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert gaffer(ws, "undo", "--yes", "--agent", forged).returncode == 0
    shown = gaffer(ws, "diff")
    assert "+pwned" not in [line for line in shown.stdout.splitlines()]
    assert not any(line.startswith("diff --git a/evil") for line in shown.stdout.splitlines())
    assert all(
        line.startswith("# ") for line in shown.stdout.split("# UNDONE", 1)[1].splitlines()[1:]
    )


def test_a_log_nested_too_deep_is_one_line(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (logs := tmp_path / "logs").mkdir()
    lines = [{"event": "session_start", "log_format": 3, "workspace": str(ws), "agent_id": "a0"}]
    lines += [
        {"event": "agent_start", "agent_id": f"a{i}", "parent_id": f"a{i - 1}" if i else None}
        | {"snapshot": None, "worktree": None}
        for i in range(3000)
    ]
    lines += [
        {"event": "merge", "agent_id": f"a{i}", "status": "applied", "files": [], "conflicts": []}
        for i in range(3000)
    ]
    (logs / "20261203-000000-deep.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (ws / ".keep").write_text("")
    Store(ws)  # its state folder, as any run makes it
    shown = gaffer(ws, "diff")
    assert shown.returncode == 1 and shown.stderr.count("\n") == 1, shown.stderr[-500:]
    assert "too deep" in shown.stderr
