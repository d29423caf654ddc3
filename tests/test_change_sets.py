"""Change sets from snapshots: what changed whatever changed it, shown and put back."""

from __future__ import annotations

import json
import os
import subprocess
import zlib
from pathlib import Path

import pytest

from workers.changes import snapshots, tree_writes
from workers.changes.change_sets import combine, compare, unified_diff
from workers.changes.snapshots import Store
from workers.changes.undo import CannotUndo, undo
from workers.guards.test_runs import is_test_run, ran_no_tests


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("x = 1\n")
    (workspace / "README.md").write_text("# app\n")
    (workspace / "old.txt").write_text("moving\n")
    (workspace / "gone.txt").write_text("bye\n")
    (workspace / "run.sh").write_text("echo hi\n")
    return workspace


def by_path(changes: list) -> dict[str, str]:  # type: ignore[type-arg]
    return {c.path: c.kind for c in changes}


def test_every_kind_of_change_is_seen_whatever_made_it(ws: Path) -> None:
    store = Store(ws)
    _, before = store.snapshot()
    (ws / "src" / "app.py").write_text("x = 2\n")
    (ws / "new.py").write_text("new\n")
    (ws / "old.txt").rename(ws / "moved.txt")
    (ws / "gone.txt").unlink()
    (ws / "run.sh").chmod(0o755)
    os.symlink("src/app.py", ws / "link")
    (ws / ".gaffer").mkdir(exist_ok=True)
    (ws / ".gaffer" / "noise").write_text("never seen")
    _, after = store.snapshot()
    changes = compare(before, after)
    assert by_path(changes) == {
        "src/app.py": "modified",
        "new.py": "added",
        "moved.txt": "renamed",
        "gone.txt": "deleted",
        "run.sh": "mode",
        "link": "added",
    }
    renamed = next(c for c in changes if c.kind == "renamed")
    assert renamed.old_path == "old.txt" and renamed.label == "old.txt → moved.txt (renamed)"


def test_an_unchanged_tree_is_the_same_snapshot_and_hashes_nothing(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first_id, _ = Store(ws).snapshot()
    hashed: list[str] = []
    original = Store._hash_and_keep

    def counting(self: Store, full: str, mode: int, size: int) -> tuple[str, bool] | None:
        hashed.append(full)
        return original(self, full, mode, size)

    monkeypatch.setattr(Store, "_hash_and_keep", counting)
    monkeypatch.setattr(snapshots, "RACY_NS", 0)  # the files were written just now
    Store(ws).snapshot()  # the stat cache is on disk: a new run reads it
    hashed.clear()
    again_id, _ = Store(ws).snapshot()
    assert again_id == first_id and hashed == []
    (ws / "README.md").write_text("# app, changed\n")
    Store(ws).snapshot()
    assert [Path(p).name for p in hashed] == ["README.md"]


def test_a_snapshot_after_a_call_saw_a_change_is_a_new_one(ws: Path) -> None:
    """A snapshot of an unchanged tree reuses the last one saved, never a stale one."""
    store = Store(ws)
    first_id, _ = store.snapshot()
    (ws / "README.md").write_text("# changed\n")
    store.scan()  # an agent's call saw the change; nothing was saved
    second_id, tree = store.snapshot()
    assert second_id != first_id and Store(ws).tree(second_id) == tree
    assert Store(ws).snapshot()[0] == second_id
    (ws / "README.md").write_text("# app\n")
    assert Store(ws).snapshot()[0] == first_id, "the same tree is the same snapshot"


def test_in_a_repository_what_git_ignores_is_not_snapshotted(ws: Path) -> None:
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / ".gitignore").write_text("build/\n*.log\n")
    (ws / "build").mkdir()
    (ws / "build" / "out.bin").write_bytes(b"\0" * 10)
    (ws / "debug.log").write_text("noise\n")
    _, tree = Store(ws).snapshot()
    assert "src/app.py" in tree and ".gitignore" in tree
    assert not {"build/out.bin", "debug.log"} & tree.keys()
    assert not any(p.startswith(".git/") for p in tree)


def test_snapshotting_a_hostile_repository_runs_nothing_of_its_config(ws: Path) -> None:
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    with (ws / ".git" / "config").open("a") as config:
        config.write('[core]\n\tfsmonitor = "touch pwned-fsmonitor; false"\n')
        config.write('[filter "evil"]\n\tclean = "touch pwned-filter; cat"\n')
    (ws / ".gitattributes").write_text("* filter=evil\n")
    _, tree = Store(ws).snapshot()
    assert "src/app.py" in tree
    assert not list(ws.glob("pwned-*"))


def test_a_non_utf8_file_name_round_trips(ws: Path) -> None:
    store = Store(ws)
    _, before = store.snapshot()
    name = os.fsdecode(b"caf\xe9.txt")
    (ws / name).write_text("bytes\n")
    _, after = store.snapshot()
    changes = compare(before, after)
    assert [c.path for c in changes] == [name]
    assert 'diff --git "a/caf\\351.txt" "b/caf\\351.txt"' in unified_diff(store, changes)
    undo(store, changes)
    assert not (ws / name).exists()


def test_undo_puts_back_every_kind_byte_for_byte(ws: Path) -> None:
    store = Store(ws)
    _, before = store.snapshot()
    originals = {p: (ws / p).read_bytes() for p in ("src/app.py", "old.txt", "gone.txt")}
    (ws / "src" / "app.py").write_text("x = 2\n")
    (ws / "old.txt").rename(ws / "moved.txt")
    (ws / "gone.txt").unlink()
    (ws / "new.py").write_text("new\n")
    (ws / "run.sh").chmod(0o755)
    _, after = store.snapshot()
    undone = undo(store, compare(before, after))
    assert len(undone) == 5
    assert {p: (ws / p).read_bytes() for p in originals} == originals
    assert not (ws / "moved.txt").exists() and not (ws / "new.py").exists()
    assert not os.stat(ws / "run.sh").st_mode & 0o111
    assert compare(before, store.scan()) == []


def test_one_store_undoes_again_and_again(ws: Path) -> None:
    """Each write stages in a folder of its own making: the one before removed it."""
    store = Store(ws)
    original = (ws / "src" / "app.py").read_text()
    for attempt in range(3):
        before = store.scan()
        (ws / "src" / "app.py").write_text(f"x = {attempt + 10}\n")
        undo(store, compare(before, store.scan()))
        assert (ws / "src" / "app.py").read_text() == original


def test_a_conflicting_undo_is_refused_and_changes_nothing(ws: Path) -> None:
    store = Store(ws)
    _, before = store.snapshot()
    (ws / "src" / "app.py").write_text("x = 2\n")
    (ws / "new.py").write_text("new\n")
    _, after = store.snapshot()
    changes = compare(before, after)
    (ws / "src" / "app.py").write_text("x = 3, someone else's\n")
    with pytest.raises(CannotUndo, match=r"src/app\.py"):
        undo(store, changes)
    assert (ws / "new.py").exists(), "all or nothing"
    assert (ws / "src" / "app.py").read_text() == "x = 3, someone else's\n"
    (ws / "src" / "app.py").write_text("x = 2\n")
    undo(store, changes)
    with pytest.raises(CannotUndo, match="already as it was before"):
        undo(store, changes)


def test_a_planted_path_in_a_change_set_cannot_leave_the_workspace(
    ws: Path, tmp_path: Path
) -> None:
    store = Store(ws)
    _, before = store.snapshot()
    (ws / "evil").write_text("x\n")
    _, after = store.snapshot()
    [change] = compare(before, after)
    data = change.as_json()
    data["path"] = "../outside.txt"
    from workers.changes.change_sets import Change

    with pytest.raises(CannotUndo, match="not a path inside"):
        undo(store, [Change.from_json(data)])
    os.symlink(tmp_path, ws / "out")
    data["path"] = "out/evil"
    with pytest.raises(CannotUndo, match="lies under a link"):
        undo(store, [Change.from_json(json.loads(json.dumps(data)))])


def test_a_folder_swapped_for_a_link_after_the_checks_is_never_followed(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container still running can swap a folder for a link between gaffer's check and
    its write: the write and the removal go through handles that never follow one."""
    store = Store(ws)
    before = store.scan()
    (ws / "src" / "app.py").write_text("x = 2\n")
    (ws / "src" / "new.py").write_text("new\n")
    changes = compare(before, store.scan())
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "app.py").write_text("the host's\n")
    (outside / "new.py").write_text("the host's too\n")
    (ws / "src" / "app.py").unlink()
    (ws / "src" / "new.py").unlink()
    (ws / "src").rmdir()
    (ws / "src").symlink_to(outside)
    monkeypatch.setattr(tree_writes, "check_path", lambda *_args: None)  # the swap came after
    app = next(c for c in changes if c.path == "src/app.py")
    assert app.before is not None
    with pytest.raises(tree_writes.CannotWrite, match="stopped part way"):
        tree_writes.write_entries(store, ["src/new.py"], {})
    with pytest.raises(tree_writes.CannotWrite, match="stopped part way"):
        tree_writes.write_entries(store, [], {"src/app.py": app.before})
    assert (outside / "app.py").read_text() == "the host's\n"
    assert (outside / "new.py").read_text() == "the host's too\n"


def test_change_sets_made_one_after_another_combine(ws: Path) -> None:
    store = Store(ws)
    _, first = store.snapshot()
    (ws / "src" / "app.py").write_text("x = 2\n")
    _, middle = store.snapshot()
    (ws / "src" / "app.py").write_text("x = 3\n")
    (ws / "old.txt").rename(ws / "moved.txt")
    _, last = store.snapshot()
    combined = combine([compare(first, middle), compare(middle, last)])
    assert by_path(combined) == {"src/app.py": "modified", "moved.txt": "renamed"}
    assert combined == compare(first, last)


def test_the_diff_is_a_patch_git_can_apply(ws: Path) -> None:
    store = Store(ws)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    _, before = store.snapshot()
    (ws / "src" / "app.py").write_text("x = 2\ny = 3\n")
    (ws / "old.txt").rename(ws / "moved.txt")
    (ws / "gone.txt").unlink()
    (ws / "new.py").write_text("new\n")
    (ws / "bin.dat").write_bytes(b"\0\1\2")
    _, after = store.snapshot()
    changes = compare(before, after)
    text = unified_diff(store, changes)
    assert "rename from old.txt\nrename to moved.txt" in text
    assert "+y = 3" in text and "Binary files a/bin.dat and b/bin.dat differ" in text
    undo(store, [c for c in changes if c.path != "bin.dat"])
    (ws / "bin.dat").unlink()
    text_only = unified_diff(store, [c for c in changes if c.path != "bin.dat"])
    applied = subprocess.run(
        ["git", "apply", "-"], cwd=ws, input=text_only, text=True, capture_output=True
    )
    assert applied.returncode == 0, applied.stderr
    assert (ws / "src" / "app.py").read_text() == "x = 2\ny = 3\n"
    assert (ws / "moved.txt").exists() and not (ws / "gone.txt").exists()


@pytest.mark.parametrize(
    "command",
    [
        "pytest",
        "python -m pytest -q",
        "python3 -m unittest discover",
        "cd app && PYTHONPATH=. timeout 60 pytest -x",
        ".venv/bin/pytest tests/",
        "make test",
        "npm run test",
        "go test ./...",
        "cargo test",
        "uv run pytest",
        "(cd sub; pytest) 2>&1",
        "pytest -n 4 -q",
        ".venv/bin/pytest -q",
        "tox -e py311",
    ],
)
def test_a_test_run_is_a_command_whose_status_is_a_runner_s(command: str) -> None:
    assert is_test_run(command)


@pytest.mark.parametrize(
    "command",
    [
        "echo pytest",
        "grep pytest x",
        "true && echo pytest",
        "pytest || true",
        "pytest | tail -5",
        "! pytest",
        "pytest; echo done",
        "x || pytest",
        "$(echo pytest)",
        "python -c 'import pytest'",
        "cat pytest.ini",
        # What a hostile model could try, to pass off a command as a passing test run:
        "pytest &",
        "command -v pytest",
        "exec -a pytest true",
        "env -S'true' pytest",
        "pytest() { true; }; pytest",
        "shopt -s expand_aliases; alias pytest=true\npytest",
        "trap 'exit 0' EXIT; pytest",
        "PATH=./bin:$PATH pytest",
        "export PATH=/tmp/fake; pytest",
        "source ./ci.sh; pytest -q",  # ci.sh may define a function `pytest`
        "source .venv/bin/activate && pytest",  # a file the agent could have written
        ". ./ci.sh && pytest -q",
        "cd app && source env.sh && python -m pytest",
        "PYTEST_ADDOPTS=--co pytest",
        "./pytest",
        "/tmp/x/pytest",
        "pytest --version",
        "pytest --collect-only",
        "make -n test",
        "cargo test --no-run",
        "go test -list .",
    ],
)
def test_a_command_that_only_mentions_a_runner_is_not_a_test_run(command: str) -> None:
    assert not is_test_run(command)


def test_configured_runners_count_and_a_run_of_no_tests_is_seen() -> None:
    assert is_test_run("./run-tests.sh --fast", ["./run-tests.sh"])
    assert is_test_run("bin/rails test", ["bin/rails test"])
    assert not is_test_run("bin/rails server", ["bin/rails test"])
    assert ran_no_tests("\n===== no tests ran in 0.01s =====\n")
    assert ran_no_tests("----\nRan 0 tests in 0.000s\n\nOK\n")
    assert ran_no_tests("ok  \texample.com/m\t0.002s [no tests to run]\n")
    assert not ran_no_tests("===== 3 passed in 0.02s =====")


def test_a_worker_killed_mid_edit_is_shown_and_undone_from_its_starting_snapshot(
    ws: Path, tmp_path: Path
) -> None:
    """The log of a run killed with -9 after w1 began: its start names a snapshot, and
    there is no change set. What changed since is w1's."""
    from tests.helpers import gaffer

    snapshot_id, _ = Store(ws).snapshot()
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = [
        {"event": "session_start", "log_format": 3, "workspace": str(ws), "agent_id": "supervisor"},
        {"event": "agent_start", "agent_id": "supervisor", "tools": []},
        {
            "event": "agent_start",
            "agent_id": "w1",
            "parent_id": "supervisor",
            "snapshot": snapshot_id,
        },
    ]
    (logs / "20261130-killed.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    original = (ws / "src" / "app.py").read_bytes()
    (ws / "src" / "app.py").write_text("x = 'half-made'\n")
    (ws / "gone.txt").unlink()

    shown = gaffer(ws, "diff", "last", "--agent", "w1")
    assert shown.returncode == 0, shown.stderr
    assert "w1 never ended" in shown.stderr and "+x = 'half-made'" in shown.stdout
    undone = gaffer(ws, "undo", "--yes", "last")
    assert undone.returncode == 0, undone.stderr
    assert (ws / "src" / "app.py").read_bytes() == original and (ws / "gone.txt").exists()
    missing = gaffer(ws, "undo", "--yes", "last", "--agent", "w9")
    assert missing.returncode == 1 and "no agent 'w9'" in missing.stderr


def test_a_resumed_run_is_told_what_an_interrupted_worker_changed(ws: Path) -> None:
    from supervisor.resume import rebuild

    store = Store(ws)
    snapshot_id, _ = store.snapshot()
    call = {"id": "c1", "name": "delegate", "arguments": '{"profile": "coder", "task": "fix"}'}
    records = [
        {"event": "user_message", "agent_id": "supervisor", "content": "fix it"},
        {"event": "llm_call", "agent_id": "supervisor", "text": "", "calls": [call]},
        {
            "event": "delegate_start",
            "agent_id": "supervisor",
            "child_id": "w1",
            "child_profile": "coder",
            "task": "fix",
        },
        {
            "event": "agent_start",
            "agent_id": "w1",
            "parent_id": "supervisor",
            "snapshot": snapshot_id,
        },
    ]
    (ws / "src" / "app.py").write_text("x = 'half'\n")
    rebuilt = rebuild(records, store)
    assert rebuilt.interrupted_workers == [
        "w1 (coder): fix; changed since it started: src/app.py (modified)"
    ]
    told = rebuilt.messages[-1]
    assert told["role"] == "tool" and "w1: src/app.py (modified)" in str(told["content"])


def test_a_folder_swapped_for_a_link_never_brings_what_it_points_at_into_the_store(
    ws: Path, tmp_path: Path
) -> None:
    """A container replaces a tracked folder with a link to /proc/self (here: to a folder
    outside holding a secret): the next snapshot must not read through it, or the secret
    lands in .gaffer/changes, which the container can read."""
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "p").mkdir()
    (ws / "p" / "environ").write_text("nothing here\n")
    subprocess.run(["git", "-C", str(ws), "add", "-A"], check=True)
    store = Store(ws)
    store.snapshot()
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "environ").write_text("OPENAI_API_KEY=sk-secret\n")
    (ws / "p" / "environ").unlink()
    (ws / "p").rmdir()
    os.symlink(outside, ws / "p")
    _, tree = store.snapshot()
    assert "p/environ" not in tree
    for path in (ws / ".gaffer" / "changes" / "objects").rglob("*"):
        if path.is_file():
            assert b"sk-secret" not in zlib.decompress(path.read_bytes())


def test_a_file_replaced_by_a_folder_and_a_rename_over_a_new_file_undo(ws: Path) -> None:
    store = Store(ws)
    _, before = store.snapshot()
    original = (ws / "old.txt").read_bytes()
    (ws / "README.md").unlink()
    (ws / "README.md").mkdir()
    (ws / "README.md" / "index.md").write_text("# now a folder\n")
    (ws / "old.txt").rename(ws / "moved.txt")
    (ws / "old.txt").write_text("a new file where the old one was\n")
    _, after = store.snapshot()
    changes = compare(before, after)
    undo(store, changes)
    assert (ws / "README.md").read_text() == "# app\n"
    assert (ws / "old.txt").read_bytes() == original and not (ws / "moved.txt").exists()
    assert compare(before, store.scan()) == []


def test_undo_never_writes_where_git_or_gaffer_would_run_it(ws: Path) -> None:
    from workers.changes.change_sets import Change

    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    store = Store(ws)
    _, before = store.snapshot()
    (ws / "hook").write_text("#!/bin/sh\ntouch pwned\n")
    _, after = store.snapshot()
    [added] = compare(before, after)
    for path in (".git/hooks/post-checkout", "sub/.GIT/config", ".gaffer/config.toml", ".mcp.json"):
        with pytest.raises(CannotUndo, match="not gaffer's to write"):
            undo(store, [Change(path, "deleted", added.after, None)])
    assert not (ws / ".git" / "hooks" / "post-checkout").exists()


def test_what_a_test_run_writes_is_not_an_edit_that_needs_another_run(ws: Path) -> None:
    from workers.facts import Facts
    from workers.guards.verification import judge

    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "src" / "__pycache__").mkdir()
    (ws / "src" / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"\0")
    _, tree = Store(ws).snapshot()
    assert not any("__pycache__" in p for p in tree), "a cache is not the project's"
    edited = Facts(modified=("src/app.py",))
    tested = Facts(command="pytest -q", exit_code=0, modified=("tests/__snapshots__/a.ambr",))
    verdict = judge([edited, tested])
    assert verdict is not None and verdict.verified
