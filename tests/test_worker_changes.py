"""Each worker's change set through the real CLI and a real container: whatever a coder
does to the files (`sed -i`, `rm`, `mv`) shows in its report, is gated, and can be shown
(`gaffer diff`) and put back (`gaffer undo`) per worker."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.docker_support import chown_tree, require_docker, user_workspace
from tests.fake_openai import FakeOpenAI, Reply
from tests.helpers import gaffer_replying, shell_reply, started_gaffer, wait_for_requests
from workers import state


@pytest.fixture(scope="module", autouse=True)
def docker_daemon() -> Any:
    return require_docker()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = user_workspace(tmp_path / "ws")
    (workspace / "app.py").write_text("def greet():\n    return 'hi'\n")
    (workspace / "test_app.py").write_text(
        "from app import greet\n\n\ndef test_greet():\n    assert greet() in ('hi', 'bye')\n"
    )
    (workspace / "old.txt").write_text("moving\n")
    (workspace / "gone.txt").write_text("bye\n")
    chown_tree(workspace)
    return workspace


shell = shell_reply


def delegate(task: str) -> Reply:
    return Reply(tool_calls=[("delegate", json.dumps({"profile": "coder", "task": task}))])


def gaffer(
    workspace: Path, *args: str, replies: list[Reply] | None = None
) -> tuple[subprocess.CompletedProcess[str], FakeOpenAI]:
    return gaffer_replying(workspace, *args, replies=replies or [])


def records(workspace: Path) -> list[dict[str, Any]]:
    [log] = sorted((workspace.parent / "logs").glob("*.jsonl"))
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_sed_edit_shows_in_the_report_and_is_gated(ws: Path) -> None:
    replies = [
        delegate("say bye"),
        shell("sed -i s/hi/bye/ app.py"),
        shell("echo pytest"),
        shell("grep -c pytest test_app.py"),
        shell("python3 -m pytest -q -k nothing"),
        shell("python3 -m unittest discover -p 'nothing_*.py'"),
        Reply(text="Done, tests pass."),
        Reply(text="w1 changed app.py."),
    ]
    done, server = gaffer(ws, "run", "make it say bye", replies=replies)
    assert done.returncode == 0, done.stderr
    assert (ws / "app.py").read_text() == "def greet():\n    return 'bye'\n"
    lines = records(ws)
    shells = [r for r in lines if r["event"] == "tool_call" and r["name"] == "run_shell"]
    assert shells[0]["facts"]["modified"] == ["app.py"], "the harness saw what sed changed"
    assert shells[-1]["facts"].get("no_tests") is True, "Ran 0 tests is not a pass"
    # Its own runs ran no test; gaffer's check, run over its change as it answered, did.
    [check] = [r for r in lines if r["event"] == "check" and r["agent_id"] == "w1"]
    assert (check["verdict"], check["command"], check["passed"]) == (
        "verified",
        "python3 -m pytest -q",
        1,
    )
    report = json.dumps(server.requests[-1])
    assert "files changed: app.py (modified)" in report
    assert "check (run by gaffer): verified: `python3 -m pytest -q` (1 passed)" in report
    [change_set] = [r for r in lines if r["event"] == "change_set" and r["agent_id"] == "w1"]
    assert [(f["path"], f["change"]) for f in change_set["files"]] == [("app.py", "modified")]


def test_a_real_passing_test_run_after_the_last_change_is_verified(ws: Path) -> None:
    replies = [
        shell("sed -i s/hi/bye/ app.py"),
        shell("python3 -m pytest -q"),
        Reply(text="Changed greet; the tests pass."),
    ]
    done, _ = gaffer(ws, "run", "--profile", "coder", "make it say bye", replies=replies)
    assert done.returncode == 0, done.stderr
    assert "Check: verified: `python3 -m pytest -q` (1 passed)" in done.stdout


def test_two_coders_are_shown_and_undone_one_at_a_time(ws: Path) -> None:
    replies = [
        Reply(
            tool_calls=[
                ("delegate", json.dumps({"profile": "coder", "task": "tidy the files"})),
                ("delegate", json.dumps({"profile": "coder", "task": "say bye"})),
            ]
        ),
        shell("rm gone.txt && mv old.txt moved.txt"),
        Reply(text="Tidied."),
        shell("sed -i s/hi/bye/ app.py"),
        Reply(text="Says bye."),
        Reply(text="Both done."),
    ]
    app_before = (ws / "app.py").read_bytes()
    originals = {name: (ws / name).read_bytes() for name in ("old.txt", "gone.txt")}
    done, _ = gaffer(ws, "run", "--no-verify", "tidy and say bye", replies=replies)
    assert done.returncode == 0, done.stderr

    w2, _ = gaffer(ws, "diff", "last", "--agent", "w2")
    assert w2.returncode == 0, w2.stderr
    assert "+    return 'bye'" in w2.stdout and "old.txt" not in w2.stdout
    whole, _ = gaffer(ws, "diff")
    assert "rename from old.txt" in whole.stdout and "app.py" in whole.stdout
    shown, _ = gaffer(ws, "logs", "last")
    assert "✎ w1 changed: gone.txt (deleted), old.txt → moved.txt (renamed)" in shown.stdout

    (ws / "app.py").write_text("def greet():\n    return 'bye, by hand'\n")
    refused, _ = gaffer(ws, "undo", "--yes", "--agent", "w2")
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1 and "app.py" in refused.stderr
    assert (ws / "app.py").read_text() == "def greet():\n    return 'bye, by hand'\n"

    undone, _ = gaffer(ws, "undo", "--yes", "--agent", "w1")
    assert undone.returncode == 0, undone.stderr
    assert {name: (ws / name).read_bytes() for name in originals} == originals
    assert not (ws / "moved.txt").exists()
    assert (ws / "app.py").read_bytes() != app_before, "w2's change is left alone"


def test_a_coder_cannot_rewrite_the_store_that_says_what_it_changed(ws: Path) -> None:
    """A forged stat cache could hide a change from the gate and from undo: the store lives
    in the user's state folder, which no container sees, and a `.gaffer` made in the
    workspace is taken out when the worker ends."""
    replies = [
        shell(
            "mkdir -p .gaffer/changes; echo '{}' > .gaffer/changes/stat-cache; "
            "touch .gaffer/changes/objects; sed -i s/hi/bye/ app.py"
        ),
        Reply(text="done"),
    ]
    done, _ = gaffer(ws, "run", "--profile", "coder", "--no-verify", "go", replies=replies)
    assert done.returncode == 0, done.stderr
    store = state.workspace_dir(ws, state.CHANGES)
    cache = json.loads((store / "stat-cache").read_text())
    assert "files" in cache, "the stat cache is as gaffer wrote it, not '{}'"
    assert (store / "objects").is_dir()
    assert not (ws / ".gaffer").exists()
    [change_set] = [r for r in records(ws) if r["event"] == "change_set"]
    assert [f["path"] for f in change_set["files"]] == ["app.py"]


def containers_of(run_id: str) -> list[str]:
    docker_client = require_docker()
    found = docker_client.containers.list(all=True, filters={"label": f"gaffer.run={run_id}"})
    return [c.short_id for c in found]


@pytest.mark.parametrize(
    ("sig", "code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGQUIT, 131)],
)
def test_a_signal_during_a_docker_worker_ends_everything_cleanly(
    ws: Path, sig: signal.Signals, code: int
) -> None:
    plant = (
        "git init -q planted && git -C planted config core.fsmonitor 'touch ../PWNED' && sleep 300"
    )
    replies = [delegate("wait a long time"), shell(plant), Reply(text="never")]
    with FakeOpenAI(replies) as server:
        proc = started_gaffer(ws, server, "run", "go")
        wait_for_requests(server, 2, timeout=60)
        time.sleep(1.5)  # the worker's container is running `sleep 300`
        started = time.monotonic()
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=30)
    assert time.monotonic() - started < 5, "ended within 5 s"
    assert proc.returncode == code, stderr
    lines = records(ws)
    run_id = lines[0]["session_id"]
    assert containers_of(run_id) == [], "no container left"
    assert not (ws / "planted" / ".git").exists(), "swept on the way out"
    assert [r["status"] for r in lines if r["event"] == "delegate_end"] == ["cancelled"]
    assert {r["agent_id"] for r in lines if r["event"] == "agent_end"} == {"supervisor", "w1"}
    status = "cancelled" if sig == signal.SIGINT else "terminated"
    assert lines[-1]["event"] == "session_end" and lines[-1]["status"] == status
    assert lines[-1]["exit_code"] == code, "the log says what the run exited with"


def test_a_killed_run_s_container_is_swept_then_removed_by_the_next_gaffer(ws: Path) -> None:
    """A run killed with -9 mid-command leaves its container up, and what it planted: the
    next gaffer command of any kind stops it, moves the plant out, removes it, and says so."""
    plant = "git init -q planted && git -C planted config core.fsmonitor 'touch ../PWNED'"
    replies = [shell(f"{plant} && sleep 300"), Reply(text="never")]
    with FakeOpenAI(replies) as server:
        proc = started_gaffer(ws, server, "run", "--profile", "coder", "go", output=False)
        deadline = time.monotonic() + 60
        while not (ws / "planted" / ".git" / "config").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        proc.kill()
        proc.wait()
    run_id = records(ws)[0]["session_id"]
    assert len(containers_of(run_id)) == 1, "kill -9 left the container up"
    done, _ = gaffer(ws, "profiles")
    assert done.returncode == 0, done.stderr
    assert containers_of(run_id) == []
    assert "removed 1 container(s) left by runs that were killed" in done.stderr
    assert not (ws / "planted" / ".git").exists(), "swept before it was removed"
    assert list(state.workspace_dir(ws, state.QUARANTINE).rglob("config"))
    subprocess.run(["git", "-c", "safe.directory=*", "status"], cwd=ws / "planted", check=False)
    assert not (ws / "PWNED").exists()


def test_a_container_whose_owner_is_not_proven_gone_stays(ws: Path) -> None:
    """An owner in another PID namespace, or with no owner token, is never taken for dead
    because its pid is not visible here."""
    docker_client = require_docker()
    tokens = {"elsewhere": "4026530000.999999999.1", "untokened": ""}
    left = [
        docker_client.containers.run(
            "gaffer-sandbox:latest",
            ["sleep", "infinity"],
            detach=True,
            labels={
                "gaffer.sandbox": "1",
                "gaffer.run": run,
                "gaffer.owner": token,
                "gaffer.pid": "999999999",
                "gaffer.host": socket.gethostname(),
            },
        )
        for run, token in tokens.items()
    ]
    try:
        done, _ = gaffer(ws, "profiles")
        assert done.returncode == 0, done.stderr
        assert len(containers_of("elsewhere")) == len(containers_of("untokened")) == 1
        assert "removed" not in done.stderr
    finally:
        for container in left:
            with contextlib.suppress(Exception):
                container.remove(force=True)


def test_isolated_coders_work_in_parallel_containers_and_both_land(ws: Path) -> None:
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "start"]):
        subprocess.run(
            ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c", "safe.directory=*", *args],
            cwd=ws,
            check=True,
        )
    chown_tree(ws)
    supervisor = [
        Reply(
            tool_calls=[
                ("delegate", json.dumps({"profile": "coder", "task": "tidy the files"})),
                ("delegate", json.dumps({"profile": "coder", "task": "say bye"})),
            ]
        ),
        Reply(text="Both done."),
    ]
    routes = {  # each waits a second at its first step, so the two overlap
        "tidy the files": [
            Reply(delay=1.0, tool_calls=shell("rm gone.txt && mv old.txt moved.txt").tool_calls),
            Reply(text="Tidied."),
        ],
        "say bye": [
            Reply(delay=1.0, tool_calls=shell("sed -i s/hi/bye/ app.py && git status").tool_calls),
            Reply(text="Says bye."),
        ],
    }
    done, _ = gaffer_replying(
        ws, "run", "--isolate", "--no-verify", "two chores", replies=supervisor, routes=routes
    )
    assert done.returncode == 0, done.stderr
    assert "return 'bye'" in (ws / "app.py").read_text()
    assert (ws / "moved.txt").exists() and not (ws / "gone.txt").exists()
    lines = records(ws)
    merges = [r for r in lines if r["event"] == "merge"]
    assert sorted(m["status"] for m in merges) == ["applied", "applied"]
    git_status = next(r for r in lines if "git status" in str(r.get("args")))
    assert not git_status["is_error"], "git works in an isolated copy"
    starts = {r["agent_id"]: r for r in lines if r["event"] == "agent_start"}
    ends = {r["agent_id"]: r for r in lines if r["event"] == "agent_end"}
    assert starts["w1"]["sandbox"] == starts["w2"]["sandbox"] == "docker"
    assert starts["w2"]["ts"] < ends["w1"]["ts"] and starts["w1"]["ts"] < ends["w2"]["ts"]
    assert not list(state.workspace_dir(ws, state.WORKTREES).iterdir())
    assert containers_of(lines[0]["session_id"]) == [], "this run's containers are gone"
    undone, _ = gaffer(ws, "undo", "--yes", "--agent", "w2")
    assert undone.returncode == 0, undone.stderr
    assert "return 'hi'" in (ws / "app.py").read_text()
