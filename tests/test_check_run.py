"""gaffer runs the check itself (workers/check/run.py), against a real Docker daemon: what
the agent did to the tests, the test run and its caches cannot change the verdict."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest

from tests.docker_support import chown_tree, require_docker, user_workspace
from workers.check.choose import Check
from workers.check.run import run_check
from workers.sandbox.options import DockerOptions

CODE = "def is_even(n):\n    return n % 2 == 0\n"
TESTS = (
    "from even import is_even\n\n\ndef test_two():\n    assert is_even(2)\n\n\n"
    "def test_three():\n    assert not is_even(3)\n"
)
CHECK = Check("python3 -m pytest -q even_test.py", "task")


@pytest.fixture(scope="module")
def client() -> Any:
    return require_docker()


def workspace(tmp_path: Path, code: str = CODE, tests: str = TESTS) -> Path:
    ws = user_workspace(tmp_path / "ws")
    (ws / "even.py").write_text(code)
    (ws / "even_test.py").write_text(tests)
    chown_tree(ws)
    return ws


def check(client: Any, ws: Path, restored: dict[str, bytes | None] | None = None, **kw: Any) -> Any:
    return run_check(
        kw.pop("check", CHECK),
        ws,
        restored=restored if restored is not None else {"even_test.py": TESTS.encode()},
        options=DockerOptions(),
        seconds=kw.pop("seconds", 60),
        docker_client=client,
    )


def test_a_passing_suite_is_verified_with_its_counts(client: Any, tmp_path: Path) -> None:
    done = check(client, workspace(tmp_path))
    assert (done.verdict, done.passed, done.failed, done.exit) == ("verified", 2, 0, 0)
    assert done.line() == "verified: `python3 -m pytest -q even_test.py` (2 passed)"


def test_a_failing_suite_names_its_first_failure(client: Any, tmp_path: Path) -> None:
    done = check(client, workspace(tmp_path, code="def is_even(n):\n    return True\n"))
    assert (done.verdict, done.passed, done.failed) == ("failed", 1, 1)
    assert "test_three" in done.detail


def test_tests_the_agent_rewrote_are_run_as_they_were(client: Any, tmp_path: Path) -> None:
    ws = workspace(tmp_path, code="def is_even(n):\n    return True\n")
    (ws / "even_test.py").write_text("def test_nothing():\n    assert True\n")
    done = check(client, ws)
    assert done.verdict == "failed" and "test_three" in done.detail
    assert (ws / "even_test.py").read_text().startswith("def test_nothing"), "the copy only"


def test_a_conftest_that_passes_everything_is_not_there(client: Any, tmp_path: Path) -> None:
    ws = workspace(tmp_path, code="def is_even(n):\n    return True\n")
    (ws / "conftest.py").write_text(
        "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
    )
    done = check(client, ws, {"even_test.py": TESTS.encode(), "conftest.py": None})
    assert done.verdict == "failed"


def test_code_that_exits_0_on_import_fails(client: Any, tmp_path: Path) -> None:
    done = check(client, workspace(tmp_path, code="import os\nos._exit(0)\n"))
    assert (done.verdict, done.exit) == ("failed", 0)
    assert "no report" in done.detail


def test_a_planted_compiled_cache_is_never_read(client: Any, tmp_path: Path) -> None:
    ws = workspace(tmp_path, code="def is_even(n):\n    return True\n")
    # A cache that would pass, with a header matching the source: Python reads caches
    # only under gaffer's own prefix in the check.
    import py_compile

    passing = tmp_path / "passing"
    passing.mkdir()
    (passing / "even.py").write_text(CODE.replace("n % 2 == 0", "n % 2 == 0 or n == 3 - 0 * n"))
    cache = ws / "__pycache__"
    cache.mkdir()
    py_compile.compile(str(passing / "even.py"), cfile=str(cache / "even.cpython-311.pyc"))
    chown_tree(ws)
    assert check(client, ws).verdict == "failed"


def test_a_check_that_hangs_times_out(client: Any, tmp_path: Path) -> None:
    ws = workspace(tmp_path, code="import time\ntime.sleep(600)\n")
    done = check(client, ws, seconds=5)
    assert done.verdict == "timed_out" and done.line().startswith("timed out:")


def test_other_runners_are_judged_by_their_summary(client: Any, tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    unittest = Check("python3 -m unittest even_test.py", "project")
    (ws / "even_test.py").write_text(
        "import unittest\nfrom even import is_even\n\n\nclass T(unittest.TestCase):\n"
        "    def test_two(self):\n        self.assertTrue(is_even(2))\n\n"
        "    def test_three(self):\n        self.assertTrue(is_even(3))\n"
    )
    chown_tree(ws)
    done = check(client, ws, {}, check=unittest)
    assert (done.verdict, done.passed, done.failed) == ("failed", 1, 1)
    nothing = check(client, ws, {}, check=Check("true", "flag"))
    assert nothing.verdict == "unchecked" and "no count of tests" in nothing.detail


def test_a_runner_the_image_lacks_leaves_the_run_unchecked(client: Any, tmp_path: Path) -> None:
    """`npm test` in an image with no npm says nothing of the change: unchecked, not failed."""
    done = check(client, workspace(tmp_path), check=Check("npm test", "project"))
    assert (done.verdict, done.exit) == ("unchecked", None), "asked of the image, never run"
    assert done.line() == "unchecked: the sandbox image has no `npm` to run the check"


def test_a_kept_test_under_a_link_is_put_back_as_a_folder_of_the_copy(
    client: Any, tmp_path: Path
) -> None:
    """The tests' folder swapped for a link out of the workspace: the copy has the folder
    again with the test as it was; nothing is written through the link."""
    ws = workspace(tmp_path, tests="")
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "even_test.py").unlink()
    (ws / "tests").symlink_to(outside)
    done = check(
        client,
        ws,
        {"tests/even_test.py": TESTS.encode()},
        check=Check("python3 -m pytest -q", "project"),
    )
    assert (done.verdict, done.passed) == ("verified", 2)
    assert done.put_back == ("tests/even_test.py",)
    assert list(outside.iterdir()) == [] and (ws / "tests").is_symlink()


def test_a_killed_runs_check_copy_and_container_are_reaped(client: Any, tmp_path: Path) -> None:
    """kill -9 during a check leaves its copy in the state folder and its container: the
    next gaffer removes both once their owner is proven gone, and never a live run's."""
    import socket

    from workers import state
    from workers.check.run import CHECKS, reap_checks
    from workers.processes import _pid_namespace, owner_token
    from workers.sandbox.leftovers import CHECK_LABEL, OWNER_LABEL, remove_leftovers

    ws = workspace(tmp_path)
    dead = f"{_pid_namespace()}.4194301.12345"  # no such process
    gone = state.workspace_dir(ws, CHECKS, f"{dead}-0a0b0c0d")
    alive = state.workspace_dir(ws, CHECKS, f"{owner_token()}-0e0f0a0b")
    for folder in (gone, alive):
        (folder / "workspace").mkdir(parents=True)
    assert reap_checks(ws) == [gone.name]
    assert not gone.exists() and alive.exists()
    labels = {CHECK_LABEL: "1", OWNER_LABEL: dead, "gaffer.host": socket.gethostname()}
    left = client.containers.create("gaffer-sandbox:latest", ["true"], labels=labels)
    mine = client.containers.create(
        "gaffer-sandbox:latest", ["true"], labels={**labels, OWNER_LABEL: owner_token()}
    )
    try:
        assert left.short_id in remove_leftovers(client)
        client.containers.get(mine.id)  # a live owner's check is left alone
    finally:
        for container in (left, mine):
            with contextlib.suppress(Exception):
                container.remove(force=True)


def test_the_deadline_is_fitted_to_the_suite_once_a_check_ended(
    client: Any, tmp_path: Path
) -> None:
    from workers.check.checker import MIN_CHECK_SECONDS, Checker
    from workers.log.events import Emitter

    ws = workspace(tmp_path)
    checker = Checker(ws, flag=CHECK.command, docker_client=client, seconds=300)
    assert checker.deadline() == 300
    done = checker.run("", Emitter([]))
    assert done.verdict == "verified" and done.seconds < MIN_CHECK_SECONDS / 3
    assert checker.deadline() == MIN_CHECK_SECONDS, "a suite of seconds: a minute, not five"


def test_without_docker_the_check_says_so_and_asks_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workers.check.checker import Checker
    from workers.log.events import Emitter
    from workers.sandbox import SandboxUnavailable
    from workers.sandbox import docker as docker_sandbox

    asked = []

    def no_docker() -> Any:
        asked.append(1)
        raise SandboxUnavailable("cannot reach the Docker daemon")

    monkeypatch.setattr(docker_sandbox, "client", no_docker)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "even_test.py").write_text(TESTS)
    checker = Checker(ws, flag=CHECK.command)
    for _ in range(2):
        done = checker.run("", Emitter([]))
        assert done.verdict == "unchecked"
        assert done.detail == "no Docker to run it in: cannot reach the Docker daemon"
    assert asked == [1]


def test_the_copy_never_reads_through_a_link_and_leaves_pipes_out(tmp_path: Path) -> None:
    from workers.check.run import _copy

    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    outside = tmp_path / "secret.txt"
    outside.write_text("host secret\n")
    (ws / "sub" / "run.sh").write_text("#!/bin/sh\n")
    (ws / "sub" / "run.sh").chmod(0o755)
    (ws / "leak.txt").symlink_to(outside)
    (ws / "out").symlink_to(tmp_path)
    os.mkfifo(ws / "pipe")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("ref\n")
    copy = tmp_path / "copy"
    assert _copy(ws, copy) is None
    assert os.readlink(copy / "leak.txt") == str(outside), "a link stays a link"
    assert (copy / "out").is_symlink() and os.readlink(copy / "out") == str(tmp_path)
    assert not os.path.lexists(copy / "pipe") and not (copy / ".git").exists()
    assert (copy / "sub" / "run.sh").stat().st_mode & 0o777 == 0o755
