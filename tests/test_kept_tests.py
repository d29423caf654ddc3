"""The tests a task keeps stay as they are whatever the agent runs: read-only mounts in
its container, and a put-back of what a command changed anyway (workers/guards/task_rules.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.docker_support import chown_tree, require_docker, user_workspace
from workers.guards.task_rules import KeptTests, kept_files
from workers.sandbox.container import container_spec
from workers.sandbox.options import DockerOptions
from workers.tools import BUILTIN_TOOLS

TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
TASK = "Fix add in calc.py. Do not modify the tests."
# What a small model tries once its code fails: each a way past a refused write.
TAMPERING = [
    "sed -i 's/== 3/== -1/' test_calc.py",
    "echo 'def test_add(): pass' > test_calc.py",
    "rm -f tests/test_more.py",
    "mv test_calc.py old_test_calc.py",
    "echo 'collect_ignore = [\"test_calc.py\"]' >> conftest.py",
]


def test_the_kept_files_are_plain_files_of_the_project(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for rel in ("test_a.py", "tests/test_b.py", "tests/data.json", "calc.py", ".tox/test_c.py"):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("")
    (ws / "env").mkdir()
    (ws / "env/pyvenv.cfg").write_text("")
    (ws / "env/test_d.py").write_text("")
    (ws / "node_modules/x").mkdir(parents=True)
    (ws / "node_modules/x/test_e.py").write_text("")
    (tmp_path / "outside_test.py").write_text("")
    os.symlink(tmp_path / "outside_test.py", ws / "test_link.py")
    every = kept_files(KeptTests("all"), ws)
    assert every == ("test_a.py", "tests/data.json", "tests/test_b.py")
    assert kept_files(KeptTests("named", ("tests",)), ws) == ("tests/data.json", "tests/test_b.py")
    assert kept_files(KeptTests("named", ("test_a.py",)), ws) == ("test_a.py",)
    assert len(kept_files(KeptTests("all"), ws, limit=2)) == 2


def test_a_kept_path_through_a_link_is_never_mounted(tmp_path: Path) -> None:
    ws = user_workspace(tmp_path / "ws")
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret/test_key.py").write_text("")
    os.symlink(tmp_path / "secret", ws / "tests")
    (ws / "test_calc.py").write_text(TESTS)
    chown_tree(ws)
    spec = container_spec(
        ws, DockerOptions(), read_only=("tests/test_key.py", "test_calc.py", "gone_test.py")
    )
    read_only = [target for _, target, ro in spec.mounts if ro]
    assert read_only == ["/workspace/test_calc.py"]


def _project(ws: Path) -> None:
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (ws / "test_calc.py").write_text(TESTS)
    (ws / "tests").mkdir()
    (ws / "tests/test_more.py").write_text("def test_more():\n    assert True\n")
    (ws / "conftest.py").write_text("")


def _coder_run(ws: Path, logs: Path, task: str, script: list[Any]) -> dict[str, Any]:
    from supervisor.run_plan import RunPlan
    from supervisor.session import Session
    from workers.assembly.build import AgentRules
    from workers.assembly.profiles import builtin_dir, load_profiles
    from workers.model.scripted import ScriptedModel

    model = ScriptedModel(script)
    session = Session(ws, logs)
    plan = RunPlan(
        profiles=load_profiles([builtin_dir()], BUILTIN_TOOLS),
        tools=dict(BUILTIN_TOOLS),
        make_model=lambda *_: model,
        top="coder",
        rules=AgentRules(verify=False),
        task_mode=True,
    )
    result = session.run(task, plan)
    outputs = [str(m.get("content")) for m in result.messages if m.get("role") == "tool"]
    return {"result": result, "outputs": outputs}


@pytest.mark.parametrize("command", TAMPERING)
def test_a_shell_command_in_the_container_cannot_change_a_kept_test(
    tmp_path: Path, command: str
) -> None:
    require_docker()
    from workers.model.scripted import call, say

    ws = user_workspace(tmp_path / "ws")
    _project(ws)
    chown_tree(ws)
    before = {
        p: (ws / p).read_text() for p in ("test_calc.py", "tests/test_more.py", "conftest.py")
    }
    script = [
        call("run_shell", command=command),
        call("run_shell", command="echo 'def add(a, b):\n    return a + b' > calc.py"),
        say("done"),
    ]
    run = _coder_run(ws, tmp_path / "logs", TASK, script)
    shown = run["outputs"][0]
    assert "Read-only file system" in shown or "busy" in shown, shown
    assert {p: (ws / p).read_text() for p in before} == before
    assert not (ws / "old_test_calc.py").exists()
    assert (ws / "calc.py").read_text() == "def add(a, b):\n    return a + b\n", "code is writable"


def test_a_task_that_asks_for_tests_gets_them_writable(tmp_path: Path) -> None:
    require_docker()
    from workers.model.scripted import call, say

    ws = user_workspace(tmp_path / "ws")
    _project(ws)
    chown_tree(ws)
    script = [call("run_shell", command="echo '# more' >> test_calc.py"), say("done")]
    _coder_run(ws, tmp_path / "logs", "Fix add in calc.py and add a test for it.", script)
    assert (ws / "test_calc.py").read_text() == TESTS + "# more\n"
