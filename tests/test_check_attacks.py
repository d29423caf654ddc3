"""What an agent could do to the workspace to make gaffer's check say what is not so (an
attacker review of workers/check/), each against the real Checker, real files and a real
Docker daemon: the check still runs the task's tests as they were, on the agent's code."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.docker_support import chown_tree, require_docker, user_workspace
from workers.changes.snapshots import MAX_KEPT_BYTES, Store
from workers.check.checker import Checker
from workers.log.events import Emitter

WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
TASK = "Fix add in calc.py. Do not modify the tests. Run `python3 -m pytest -q tests`"
PASSING = "def test_add():\n    pass\n"


@pytest.fixture(scope="module")
def client() -> Any:
    return require_docker()


def project(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    ws = user_workspace(tmp_path / "ws")
    (ws / "tests").mkdir()
    for name, text in {"calc.py": WRONG, "tests/test_calc.py": TESTS, **(files or {})}.items():
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text(text)
    chown_tree(ws)
    return ws


def checker(ws: Path, client: Any, task: str = TASK) -> Checker:
    found = Checker(ws, store=Store(ws), docker_client=client, seconds=120)
    found.choose(task)  # as a run does before its agents change anything
    return found


def check(found: Checker, task: str = TASK) -> Any:
    return found.run(task, Emitter([]))


def test_a_pytest_module_in_the_workspace_is_not_pytest(client: Any, tmp_path: Path) -> None:
    ws = project(tmp_path)
    found = checker(ws, client)
    (ws / "pytest.py").write_text("print('1 passed')\nraise SystemExit(0)\n")
    assert check(found).verdict == "failed"


def test_a_plugin_by_entry_point_in_the_workspace_is_not_loaded(
    client: Any, tmp_path: Path
) -> None:
    ws = project(tmp_path)
    found = checker(ws, client)
    (ws / "zz-1.0.dist-info").mkdir()
    (ws / "zz-1.0.dist-info/METADATA").write_text("Name: zz\nVersion: 1.0\n")
    (ws / "zz-1.0.dist-info/entry_points.txt").write_text("[pytest11]\nzz = zz_helper\n")
    (ws / "zz_helper.py").write_text(
        "def pytest_collection_modifyitems(items):\n"
        "    for item in items:\n        item.runtest = lambda: None\n"
    )
    assert check(found).verdict == "failed"


@pytest.mark.parametrize("where", ["tests/site-packages/conftest.py", "venv/conftest.py"])
def test_a_new_conftest_anywhere_is_taken_out(client: Any, tmp_path: Path, where: str) -> None:
    ws = project(tmp_path)
    found = checker(ws, client)
    rig = (
        "import pytest\n\n\n@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_runtest_call(item):\n    item.runtest = lambda: None\n"
    )
    (ws / where).parent.mkdir(parents=True, exist_ok=True)
    (ws / where).write_text(rig)
    if where.startswith("venv"):
        (ws / "tests/helpers").symlink_to("../venv")
    done = check(found)
    assert done.verdict == "failed" and where in done.put_back


def test_code_that_exits_127_fails_rather_than_going_unchecked(client: Any, tmp_path: Path) -> None:
    ws = project(tmp_path)
    found = checker(ws, client)
    (ws / "calc.py").write_text("import os\n\nos._exit(127)\n")
    assert check(found).verdict == "failed"


def test_a_workspace_made_too_large_fails(client: Any, tmp_path: Path) -> None:
    ws = project(tmp_path)
    found = checker(ws, client)
    with open(ws / "blob.bin", "wb") as blob:
        blob.truncate(3 * 1024**3)  # sparse: no disk spent
    done = check(found)
    assert done.verdict == "failed" and "too large" in done.detail


def test_a_same_sized_change_with_its_time_set_back_is_checked_again(
    client: Any, tmp_path: Path
) -> None:
    ws = project(tmp_path)
    found = checker(ws, client)
    (ws / "calc.py").write_text(RIGHT)
    assert check(found).verdict == "verified"
    before = os.stat(ws / "calc.py")
    (ws / "calc.py").write_text(WRONG)  # the same size
    os.utime(ws / "calc.py", ns=(before.st_atime_ns, before.st_mtime_ns))
    assert check(found).verdict == "failed"


def test_the_makefile_of_a_make_test_check_is_run_as_it_was(client: Any, tmp_path: Path) -> None:
    task = "Fix add in calc.py (run `make test`). Do not modify the tests."
    ws = project(tmp_path, {"Makefile": "test:\n\tpython3 -m pytest -q tests\n"})
    found = checker(ws, client, task)
    (ws / "Makefile").write_text("test:\n\t@echo '3 passed'\n")
    done = check(found, task)
    assert done.verdict == "failed" and done.put_back == ("Makefile",)


def test_the_tests_data_in_a_test_folder_is_put_back(client: Any, tmp_path: Path) -> None:
    reads = (
        "from pathlib import Path\n\nfrom calc import add\n\n\ndef test_add():\n"
        "    assert str(add(1, 2)) == (Path(__file__).parent / 'expected.txt').read_text()\n"
    )
    ws = project(tmp_path, {"test/test_calc.py": reads, "test/expected.txt": "3"})
    task = "Fix add in calc.py. Do not modify the tests."
    found = checker(ws, client, task)
    (ws / "test/expected.txt").write_text("-1")
    done = check(found, task)
    assert done.verdict == "failed" and "test/expected.txt" in done.put_back


def test_a_kept_test_made_a_pipe_hangs_nothing(client: Any, tmp_path: Path) -> None:
    ws = project(tmp_path)
    found = checker(ws, client)
    (ws / "tests/test_calc.py").unlink()
    os.mkfifo(ws / "tests/test_calc.py")
    done = check(found)
    assert done.verdict == "failed" and "tests/test_calc.py" in done.put_back


def test_a_changed_file_whose_start_was_not_kept_fails(client: Any, tmp_path: Path) -> None:
    """The tests' data file is too large for its start to be kept: changed, the check
    cannot run the tests as they were, and says so rather than running them without it."""
    ws = project(tmp_path)
    with open(ws / "tests/data.bin", "wb") as data:
        data.truncate(MAX_KEPT_BYTES + 1)
    found = checker(ws, client)
    with open(ws / "tests/data.bin", "r+b") as data:
        data.write(b"x")
    done = check(found)
    assert done.verdict == "failed" and "tests/data.bin" in done.detail


def test_a_resumed_run_checks_against_the_first_runs_start(tmp_path: Path) -> None:
    """The agent rewrote the tests, and the run was killed: the run that resumes it puts
    them back as the first run found them, not as the kill left them."""
    from supervisor.resume import first_baseline
    from workers.log.events import Recorder
    from workers.log.schema import AgentStart, CheckChosen

    ws = project(tmp_path)
    first, _ = Store(ws).snapshot()
    (ws / "tests/test_calc.py").write_text(PASSING)  # before the kill
    resumed = Checker(ws, store=Store(ws), baseline_id=first)
    restored, lost = resumed.restored(TASK, ws, {"calc.py", "tests/test_calc.py"})
    assert restored["tests/test_calc.py"] == TESTS.encode() and lost == []
    assert resumed.baseline_id == first
    gone = Checker(ws, store=Store(ws), baseline_id="0" * 64)
    assert gone.baseline_id != "0" * 64, "a snapshot gone from the store: the workspace now"

    recorder = Recorder()
    events = Emitter([recorder])
    started = AgentStart("m", [], "host", 5, None, None, snapshot="a" * 64)
    events.bind(agent_id="supervisor").emit(started)
    assert first_baseline(recorder.records) == "a" * 64
    events.emit(CheckChosen("check: `pytest`", "pytest", "task", first))
    assert first_baseline(recorder.records) == first, "a chain keeps its first run's"
