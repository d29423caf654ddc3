"""The tests a task keeps stay as they are whatever the agent runs: read-only mounts in
its container, and a put-back of what a command changed anyway (workers/guards/task_rules.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.docker_support import chown_tree, require_docker, user_workspace
from tests.helpers import run_editor
from workers.guards.task_rules import KeptTests, kept_files
from workers.log.events import Recorder
from workers.model.scripted import call, say
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

    ws = user_workspace(tmp_path / "ws")
    _project(ws)
    chown_tree(ws)
    script = [call("run_shell", command="echo '# more' >> test_calc.py"), say("done")]
    _coder_run(ws, tmp_path / "logs", "Fix add in calc.py and add a test for it.", script)
    assert (ws / "test_calc.py").read_text() == TESTS + "# more\n"


# -- on the host, and past the mounts: what a command changed is put back -----------------

TEST_RUN = f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"
WRONG = "def add(a, b):\n    return a - b\n"


def _host_run(ws: Path, task: str, script: list[Any]) -> tuple[Any, Recorder]:
    (ws / "calc.py").write_text(WRONG)
    (ws / "test_calc.py").write_text(TESTS)
    result, recorder, _ = run_editor(ws, script, task, file_blocks=False)
    return result, recorder


def _held(recorder: Recorder) -> list[dict[str, Any]]:
    return [r for r in recorder.records if r["event"] == "boundary"]


def test_a_test_run_against_tests_a_command_changed_verifies_nothing(workspace: Path) -> None:
    """The command makes the kept test pass against the wrong code and runs it: the test
    is put back right after, the model is told, and the run is not verified by that run."""
    tamper = f"sed -i 's/== 3/== -1/' test_calc.py && {TEST_RUN}"
    script = [call("run_shell", command=tamper), say("The tests pass."), say("They pass.")]
    script += [say("They pass.")]
    result, recorder = _host_run(workspace, TASK, script)
    assert (workspace / "test_calc.py").read_text() == TESTS
    [shell] = [r for r in recorder.records if r["event"] == "tool_call"]
    assert shell["is_error"] and "1 passed" in shell["content"]
    assert shell["content"].endswith(
        "gaffer put test_calc.py back as it was before this call: the task's tests stay as "
        "they are in this run (the task says not to modify the tests). Change calc.py instead."
    )
    assert shell["facts"]["tests_put_back"] == ["test_calc.py"]
    assert "modified" not in shell["facts"], "no change of the agent's is left"
    [boundary] = _held(recorder)
    assert boundary["action"] == "put_back" and boundary["paths"] == ["test_calc.py"]
    assert "Verification: unverified" in result.outcome.answer


@pytest.mark.parametrize(
    ("command", "left"),
    [
        ("rm test_calc.py", {"test_calc.py": TESTS}),
        ("mv test_calc.py old.py", {"test_calc.py": TESTS, "old.py": None}),
        ("echo 'collect_ignore = [\"test_calc.py\"]' > conftest.py", {"conftest.py": None}),
    ],
)
def test_each_way_of_changing_a_kept_test_is_put_back(
    workspace: Path, command: str, left: dict[str, str | None]
) -> None:
    script = [call("run_shell", command=command), say("done"), say("done"), say("done")]
    _, recorder = _host_run(workspace, TASK, script)
    for rel, content in left.items():
        path = workspace / rel
        assert (path.read_text() if path.exists() else None) == content, rel
    assert [b["action"] for b in _held(recorder)] == ["put_back"]


def test_a_task_that_asks_for_a_new_test_keeps_only_those_there(workspace: Path) -> None:
    """'Add a test; do not modify the existing tests': a new test file is the agent's to
    make, by a write or a command; the existing one is still put back."""
    task = "Add a test for add in test_add_more.py. Do not modify the existing tests."
    script = [
        call("write_file", path="test_add_more.py", content="def test_more():\n    pass\n"),
        call("run_shell", command="echo 'def test_x(): pass' > test_x.py; echo >> test_calc.py"),
        say("done"),
        say("done"),
        say("done"),
    ]
    _, recorder = _host_run(workspace, task, script)
    assert (workspace / "test_add_more.py").exists() and (workspace / "test_x.py").exists()
    assert (workspace / "test_calc.py").read_text() == TESTS
    write = next(r for r in recorder.records if r.get("name") == "write_file")
    assert not write["is_error"]
    assert [b["paths"] for b in _held(recorder)] == [["test_calc.py"]]


def test_a_kept_test_behind_a_planted_link_is_not_written_through_it(
    workspace: Path, tmp_path: Path
) -> None:
    """The command swaps the tests' folder for a link out of the workspace: nothing is
    written through the link, the run says the tests were changed, and it is unverified."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "tests").mkdir()
    (workspace / "tests/test_more.py").write_text("def test_more():\n    assert True\n")
    swap = f"mv tests tests_was && ln -s {outside} tests"
    script = [call("run_shell", command=swap), say("done"), say("done"), say("done")]
    result, recorder = _host_run(workspace, TASK, script)
    assert list(outside.iterdir()) == []
    [boundary] = _held(recorder)
    assert boundary["action"] == "not_put_back" and "tests/test_more.py" in boundary["paths"]
    assert "could not put" in boundary["message"]
    assert "the task's tests were changed and not put back" in result.outcome.answer


def test_a_kept_test_replaced_past_its_mount_is_put_back(tmp_path: Path) -> None:
    """In the container, the folder above a mounted test is renamed and a new test put in
    its place: the mount went with the folder, so gaffer puts the test back after the
    command."""
    require_docker()
    ws = user_workspace(tmp_path / "ws")
    _project(ws)
    chown_tree(ws)
    swap = "mv tests tests_was && mkdir tests && echo 'def test_more(): pass' > tests/test_more.py"
    script = [call("run_shell", command=swap), say("done")]
    run = _coder_run(ws, tmp_path / "logs", TASK, script)
    assert (ws / "tests/test_more.py").read_text() == "def test_more():\n    assert True\n"
    assert not (ws / "tests_was/test_more.py").exists()
    assert "gaffer put tests/test_more.py, tests_was/test_more.py back" in run["outputs"][0]


def test_a_workers_task_cannot_drop_the_users_rule(tmp_path: Path) -> None:
    """The user said not to modify the tests; the supervisor's task for its coder leaves
    that out. The worker's container still mounts them read-only, and what gets past the
    mount is put back."""
    require_docker()
    from supervisor.run_plan import RunPlan
    from supervisor.session import Session
    from workers.assembly.build import AgentRules
    from workers.assembly.profiles import builtin_dir, load_profiles
    from workers.model.scripted import RoutedModel, Step

    ws = user_workspace(tmp_path / "ws")
    _project(ws)
    chown_tree(ws)
    worker_task = "Make the tests pass."
    swap = "mv tests tests_was && mkdir tests && echo 'def test_more(): pass' > tests/test_more.py"
    scripts: dict[str, list[Step]] = {
        TASK: [call("delegate", profile="coder", task=worker_task), say("done")],
        worker_task: [
            call("run_shell", command="sed -i 's/== 3/== -1/' test_calc.py"),
            call("run_shell", command=swap),
            say("done"),
        ],
    }
    session = Session(ws, tmp_path / "logs")
    plan = RunPlan(
        profiles=load_profiles([builtin_dir()], BUILTIN_TOOLS),
        tools=dict(BUILTIN_TOOLS),
        make_model=lambda *_: RoutedModel(scripts),
        rules=AgentRules(verify=False),
    )
    session.run(TASK, plan)
    assert (ws / "test_calc.py").read_text() == TESTS
    assert (ws / "tests/test_more.py").read_text() == "def test_more():\n    assert True\n"
    from supervisor.runlog import read_records

    records = read_records(session.log.path)
    shells = [r for r in records if r["event"] == "tool_call" and r["name"] == "run_shell"]
    assert "Device or resource busy" in shells[0]["content"], "the mount held"
    assert shells[1]["facts"]["tests_put_back"] == ["tests/test_more.py", "tests_was/test_more.py"]


def test_the_user_site_is_off_in_the_container(tmp_path: Path) -> None:
    """HOME is the container's own: a .pth left in its user site would run in every later
    Python, the test runs gaffer believes included."""
    client = require_docker()
    from workers.limits import Budget
    from workers.sandbox.docker import docker_sandbox

    ws = user_workspace(tmp_path / "ws")
    chown_tree(ws)
    with docker_sandbox(
        ws, DockerOptions(), run_id="t", agent_id="w1", docker_client=client
    ) as box:
        tool = BUILTIN_TOOLS["run_shell"]
        plant = (
            'd=$(python3 -c "import site; print(site.getusersitepackages())") && mkdir -p "$d" '
            '&& echo \'import sys; sys.stdout.write("PLANTED\\n")\' > "$d/x.pth" && python3 -c pass'
        )
        result = box.run(tool, tool.args.model_validate({"command": plant}), Budget(max_seconds=30))
    assert result.facts.exit_code == 0 and "PLANTED" not in result.output


# -- the rules, and what the gate makes of a put-back --------------------------------------


def test_the_wordings_that_keep_the_tests(tmp_path: Path) -> None:
    from workers.guards.task_rules import kept_tests

    for said in (
        "Do not modify or delete the tests.",
        "Leave the tests untouched.",
        "The tests are read-only.",
        "You may not change the tests.",
        "Do not modify anything under tests/.",
        "Don't change, move or delete the test files.",
        "Don't modify, delete or rename any tests.",
        "Do not modify the provided tests.",
        "Do not modify any files under tests/.",
        "Tests must remain unchanged.",
        "No changes to the tests.",
        "Modifying the tests is not allowed.",
        "Do not modify or add tests.",
    ):
        kept = kept_tests(said, tmp_path, by_command=False)
        assert kept is not None and kept.new_files, said
    also = kept_tests("Add a test for x. Do not modify the existing tests.", tmp_path)
    assert also is not None and not also.new_files
    for said in ("Fix x. Do not change the test command.", "The test runner is read-only."):
        assert kept_tests(said, tmp_path, by_command=False) is None, said


def test_what_steers_a_test_run_is_kept_wherever_it_is(tmp_path: Path) -> None:
    named = KeptTests("named", ("tests/unit/test_a.py",), new_files=False)
    for steering in ("conftest.py", "tests/conftest.py", "pytest.ini", "tox.ini"):
        assert named.keeps(steering) and named.keeps(steering, new=True), steering
    assert not named.keeps("tests/unit/test_new.py", new=True), "the task asks for new tests"
    every = KeptTests("all")
    assert every.keeps("tests/test_new.py", new=True)
    assert not every.keeps("tests/out/report.json", new=True), "a test run's own output"
    assert every.keeps("tests/pyproject.toml", new=True), "a new one can hold pytest's settings"
    assert not every.keeps("pyproject.toml"), "the project's own is its to change"
    assert every.keeps("tests/data/expected.json"), "the tests' data, there at the start"

    ws = tmp_path / "ws"
    (ws / "tests/unit").mkdir(parents=True)
    for rel in ("conftest.py", "tests/conftest.py", "tests/unit/test_a.py", "other/conftest.py"):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("")
    (ws / os.fsdecode(b"tests/unit/test_\xff.py")).write_text("")
    assert kept_files(named, ws) == ("conftest.py", "tests/conftest.py", "tests/unit/test_a.py")


def test_a_test_the_agent_made_stays_its_own_to_change(workspace: Path) -> None:
    """'Add a test; do not modify the existing tests': the new test is written, and
    written again, by a call and by a command."""
    task = "Add a test for add in test_more.py. Do not modify the existing tests."
    first = "from calc import add\n\n\ndef test_more():\n    assert add(1, 1) == 0\n"
    script = [
        call("write_file", path="test_more.py", content=first),
        call("write_file", path="test_more.py", content=first.replace("== 0", "== 2")),
        call("run_shell", command="echo '# checked' >> test_more.py"),
        say("done"),
        say("done"),
        say("done"),
    ]
    _, recorder = _host_run(workspace, task, script)
    calls = [r for r in recorder.records if r["event"] == "tool_call"]
    assert [c["is_error"] for c in calls] == [False, False, False]
    assert (workspace / "test_more.py").read_text().endswith("== 2\n# checked\n")
    assert _held(recorder) == []


def test_a_test_changed_again_as_it_is_put_back_is_said_so(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process the command left running writes the test again the moment gaffer has put
    it back: the run is told, and cannot be verified."""
    from workers.guards import kept_put_back

    real_undo = kept_put_back.undo

    def raced(store: Any, changes: Any) -> list[str]:
        done = real_undo(store, changes)
        (workspace / "test_calc.py").write_text("def test_add():\n    pass\n")
        return done

    monkeypatch.setattr(kept_put_back, "undo", raced)
    script = [call("run_shell", command="echo >> test_calc.py"), say("done"), say("done")]
    script += [say("done")]
    result, recorder = _host_run(workspace, TASK, script)
    [boundary] = _held(recorder)
    assert boundary["action"] == "not_put_back"
    assert "test_calc.py changed again as gaffer put it back" in boundary["message"]
    assert "the task's tests were changed and not put back" in result.outcome.answer


def test_the_gate_counts_a_put_back_as_an_edit_even_in_a_workers_evidence() -> None:
    from workers.facts import Facts
    from workers.guards.verification import judge

    run = f"{sys.executable} -m pytest -q"
    rigged = Facts(command=run, exit_code=0, tests_put_back=("test_calc.py",))
    verdict = judge([Facts(worker="w1", evidence=(Facts(modified=("calc.py",)), rigged))])
    assert verdict is not None and not verdict.verified and verdict.untested
    again = judge([rigged, Facts(command=run, exit_code=0)])
    assert again is not None and again.verified
    left = judge([Facts(command=run, exit_code=0, tests_changed=("conftest.py",))])
    assert left is not None and not left.verified and "conftest.py" in left.reason
    later = judge([Facts(tests_changed=("x_test.py",)), Facts(command=run, exit_code=0)])
    assert later is not None and not later.verified, "a later passing run does not clear it"


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("python -m pytest -q", None),
        ("cd app && timeout 60 python3 -m pytest -x -p no:cacheprovider", None),
        ("PYTHONPATH=src:. pytest -q --tb=short", None),
        ("cd /workspace/pkg && uv run pytest > out.txt", None),
        ("make test", None),
        ("cat > conftest.py <<EOF\nx = 1\nEOF\npython -m pytest -q", "it runs `cat` too"),
        ("echo hi; pytest", "it runs `echo` too"),
        ("python -m pytest -k 'not test_add'", "it picks which tests run (-k)"),
        ("pytest -ktest_a", "it picks which tests run (-ktest_a)"),
        ("pytest --deselect test_calc.py::test_add", "it picks which tests run (--deselect)"),
        ("pytest -p evil_plugin", "it picks which tests run (-p)"),
        ("pytest -c /dev/null", "it picks which tests run (-c)"),
        ("pytest --rootdir=/tmp", "it picks which tests run (--rootdir=/tmp)"),
        ("python -m unittest -k x", "it picks which tests run (-k)"),
        ("PYTEST_PLUGINS=evil pytest", "it sets PYTEST_PLUGINS"),
        ("PYTHONPATH=/tmp/x pytest", "it sets PYTHONPATH outside the workspace"),
        ("env PYTEST_PLUGINS=x pytest", "it is not one plain test command"),
        ("env -i pytest", "it is not one plain test command"),
        ("cd /tmp/copy && pytest", "it runs the tests from /tmp/copy"),
        ("cd .. && pytest", "it runs the tests from .."),
        ("cd /workspace/../tmp && pytest", "it runs the tests from /workspace/../tmp"),
        ("cd tests && cd .. && set -e; pytest --tb short -W error -n 4 -ra", None),
        ("TZ=UTC DJANGO_SETTINGS_MODULE=app.settings pytest --junitxml /tmp/r.xml", None),
        ("PYTHONPATH=src:/tmp pytest", "it sets PYTHONPATH outside the workspace"),
        ("pytest -qk test_ok", "it picks which tests run (-qk)"),
        ("pytest -qc /tmp/x.ini", "it picks which tests run (-qc)"),
        ("pytest @/tmp/args", "it reads its arguments from /tmp/args"),
        (
            "pytest ../elsewhere/test_ok.py",
            "it runs tests from outside the workspace (../elsewhere/test_ok.py)",
        ),
        ("pytest tests/test_b.py::test_ok", "it picks which tests run (tests/test_b.py::test_ok)"),
        ("pytest -p no:unittest", "it picks which tests run (-p)"),
        ("unset PYTHONNOUSERSITE; python -m pytest", "it runs `unset` too"),
        ("export -n X; pytest", "it runs `export` too"),
        ("/tmp/bin/pytest", "it runs /tmp/bin/pytest, from outside the workspace"),
        (".venv/bin/python -m pytest -q", None),
        ("python -X pycache_prefix=/tmp/p -m pytest", "it runs Python with -X"),
        ("make test PYTEST_ADDOPTS=-kfoo", "it passes PYTEST_ADDOPTS=-kfoo on to the tests"),
        ("tox -- -k foo", "it passes -- on to the tests"),
        ("npm run test", None),
        ("go test ./...", None),
        ("go test -run X ./...", "it passes -run on to the tests"),
        ("python -m unittest discover -s tests -v", None),
        ("python -m unittest discover -s /tmp", "it runs tests from outside the workspace (/tmp)"),
    ],
)
def test_which_test_runs_can_stand_for_kept_tests(command: str, why: str | None) -> None:
    from workers.guards.plain_runs import steered

    assert steered(command) == why
    if command.startswith("cd /workspace/.."):
        return
    host = command.replace("/workspace", "/home/u/project")
    if host.startswith("/tmp/bin"):  # on the host, a program outside is the user's own
        why = None
    hosts = steered(host, roots=["/home/u/project"], scratch=())
    assert hosts == (why and why.replace("/workspace", "/home/u/project"))


def test_tests_rigged_and_run_in_one_command_verify_nothing(workspace: Path) -> None:
    """The command writes a conftest.py that passes every test and deletes itself when
    pytest ends: no snapshot between calls sees it, and its pass verifies nothing."""
    rig = (
        "import os, pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
        "    outcome.get_result().outcome = 'passed'\n\n\n"
        "def pytest_unconfigure(config):\n    os.remove(__file__)\n"
    )
    command = f"cat > conftest.py <<'EOF'\n{rig}EOF\n{TEST_RUN}"
    still_wrong = "def add(a, b):\n    return b - a\n"
    script = [call("read_file", path="calc.py")]
    script += [call("write_file", path="calc.py", content=still_wrong)]
    script += [call("run_shell", command=command), say("They pass."), say("They pass.")]
    script += [say("They pass.")]
    result, recorder = _host_run(workspace, TASK, script)
    shell = next(r for r in recorder.records if r.get("name") == "run_shell")
    assert shell["facts"]["exit_code"] == 0 and not (workspace / "conftest.py").exists()
    assert shell["facts"]["steered"] == "it runs `cat` too"
    assert "Verification: unverified" in result.outcome.answer
    assert "cannot verify the tests the task keeps: it runs `cat` too" in result.outcome.answer
    named = f"{TASK} Run the tests with: {TEST_RUN} -k add"
    script = [call("run_shell", command=f"{TEST_RUN} -k add"), say("done")]
    (workspace / "calc.py").write_text(WRONG)
    _, recorder = _host_run(workspace, named, script)
    shell = next(r for r in recorder.records if r["event"] == "tool_call")
    assert "steered" not in shell["facts"], "the task's own command stands for its tests"


def test_only_the_user_names_the_command_that_always_counts(tmp_path: Path) -> None:
    """A worker's brief is a model's words: a command it names is judged like any other."""
    from workers.aids.task_rules import TaskRules

    rules = TaskRules(by_command=False, user_task="Fix parse. Do not modify the tests.")
    brief = "Fix parse; check with `pytest -p no:unittest -k parse`."
    kept = rules.kept(brief, tmp_path, ())
    assert kept is not None and kept.command is None
    named = TaskRules(by_command=False, user_task=f"{TASK} Run the tests with: {TEST_RUN}")
    kept = named.kept(brief, tmp_path, ())
    assert kept is not None and kept.command == TEST_RUN


def test_a_rule_said_in_a_later_turn_holds_from_then_on(tmp_path: Path) -> None:
    """In a conversation the user says "do not modify the tests" only in their second
    message: the agent's commands are held to it from that turn."""
    from supervisor.run_plan import RunPlan
    from supervisor.session import Session
    from tests.helpers import HOST_CODER
    from workers.assembly.build import AgentRules
    from workers.assembly.profiles import builtin_dir, load_profiles
    from workers.model.scripted import ScriptedModel

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text(WRONG)
    (ws / "test_calc.py").write_text(TESTS)
    mine = tmp_path / "profiles"
    mine.mkdir()
    (mine / "hostcoder.toml").write_text(HOST_CODER)
    model = ScriptedModel(
        [
            say("calc.py adds two numbers, wrongly."),
            call("run_shell", command="sed -i 's/== 3/== -1/' test_calc.py"),
            say("done"),
        ]
    )
    session = Session(ws, tmp_path / "logs")
    plan = RunPlan(
        profiles=load_profiles([builtin_dir(), mine], BUILTIN_TOOLS),
        tools=dict(BUILTIN_TOOLS),
        make_model=lambda *_: model,
        top="hostcoder",
        approve=lambda _command, _reason: True,
        rules=AgentRules(verify=False),
    )
    session.start(plan, task="What does calc.py do?")
    try:
        session.turn("What does calc.py do?")
        session.turn("Make the tests pass. Do not modify the tests.")
    finally:
        session.close()
    assert (ws / "test_calc.py").read_text() == TESTS


def test_a_compiled_copy_planted_beside_a_kept_test_is_taken_out(workspace: Path) -> None:
    """pytest runs its cached compiled copy of a test when the header matches the source:
    a command writes one that passes. Snapshots leave __pycache__ out; gaffer removes
    the kept tests' compiled copies after every call, so the next run runs the source."""
    plant = (
        f"{sys.executable} - <<'EOF'\n"
        "import importlib.util, marshal, pathlib, sys, pytest\n"
        "source = pathlib.Path('test_calc.py').read_bytes()\n"
        "code = compile('def test_add():\\n    pass\\n', 'test_calc.py', 'exec')\n"
        "tag = f'{sys.implementation.cache_tag}-pytest-{pytest.__version__}'\n"
        "folder = pathlib.Path('__pycache__'); folder.mkdir(exist_ok=True)\n"
        "(folder / f'test_calc.{tag}.pyc').write_bytes(importlib.util.MAGIC_NUMBER\n"
        "    + b'\\x03\\x00\\x00\\x00' + importlib.util.source_hash(source)[:8] + marshal.dumps(code))\n"
        "EOF"
    )
    script = [call("run_shell", command=plant), call("run_shell", command=TEST_RUN)]
    script += [say("done"), say("done"), say("done")]
    _, recorder = _host_run(workspace, TASK, script)
    planted, ran = [r for r in recorder.records if r["event"] == "tool_call"][:2]
    assert planted["facts"]["exit_code"] == 0
    assert not list((workspace / "__pycache__").glob("test_calc.*.pyc"))
    assert ran["facts"]["exit_code"] == 1 and "1 failed" in ran["content"]


def test_a_conftest_made_where_git_ignores_it_is_removed(workspace: Path) -> None:
    """Snapshots leave out what git ignores: a conftest.py made in an ignored folder
    would steer every plain run unseen. It is removed after the call that made it."""
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    (workspace / ".gitignore").write_text("scratch/\n.venv/\n")
    rig = "import pytest\n\n\ndef pytest_sessionfinish(session):\n    session.exitstatus = 0\n"
    make = f"mkdir -p scratch .venv/lib && cat > scratch/conftest.py <<'EOF'\n{rig}EOF\n"
    make += "echo '' > .venv/lib/conftest.py"  # a package's own, in a virtual environment
    script = [call("run_shell", command=make), say("done"), say("done"), say("done")]
    _, recorder = _host_run(workspace, TASK, script)
    assert not (workspace / "scratch/conftest.py").exists()
    assert (workspace / ".venv/lib/conftest.py").exists()
    [boundary] = _held(recorder)
    assert boundary["action"] == "put_back" and boundary["paths"] == ["scratch/conftest.py"]
    assert "made where git ignores it" in boundary["message"]
