"""Every run that could change files ends with gaffer running the check itself
(supervisor/run_check.py), through `gaffer run` as a user runs it, with a scripted model
and a real Docker daemon: the verdict is that run's, never the agent's words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.docker_support import chown_tree, require_docker
from tests.fake_openai import FakeOpenAI, Reply
from tests.helpers import gaffer, host_coder_workspace, read_then_write

WRONG = "def is_even(n):\n    return True\n"
RIGHT = "def is_even(n):\n    return n % 2 == 0\n"
TESTS = (
    "from even import is_even\n\n\ndef test_two():\n    assert is_even(2)\n\n\n"
    "def test_three():\n    assert not is_even(3)\n"
)
# The held-out exercises' wording: the command in parentheses, mid-sentence.
TASK = (
    "Implement is_even in even.py so the tests in even_test.py pass (run them with: "
    "python3 -m pytest -q even_test.py). Do not modify the tests."
)


@pytest.fixture(autouse=True)
def docker() -> None:
    require_docker()


def workspace(tmp_path: Path, files: dict[str, str]) -> Path:
    ws = host_coder_workspace(tmp_path, files)
    chown_tree(ws)
    return ws


def run(ws: Path, replies: list[Reply], *flags: str, task: str = TASK) -> tuple[int, dict, str]:
    with FakeOpenAI(replies) as server:
        done = gaffer(
            ws, "run", *flags, "--profile", "hostcoder", "--output-format", "json", task,
            server=server, timeout=180,
        )  # fmt: skip
    return done.returncode, json.loads(done.stdout), done.stderr


def test_an_answer_that_claims_a_test_run_that_never_happened_fails(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"even.py": "def is_even(n):\n    pass\n", "even_test.py": TESTS})
    said = Reply(text="I ran the tests and they all pass.")
    code, result, stderr = run(ws, [read_then_write("even.py", WRONG), said])
    assert code == 3, stderr
    assert result["verified"] is False and result["check"]["verdict"] == "failed"
    assert result["check"]["command"] == "python3 -m pytest -q even_test.py"
    assert result["check"]["source"] == "task" and result["check"]["failed"] == 1
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("gaffer: check failed: `python3 -m pytest -q even_test.py`")
    assert "completed" not in last


def test_a_right_fix_is_verified_by_gaffer_s_own_run(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"even.py": "def is_even(n):\n    pass\n", "even_test.py": TESTS})
    code, result, stderr = run(ws, [read_then_write("even.py", RIGHT), Reply(text="Fixed.")])
    assert code == 0, stderr
    assert result["verified"] is True and result["check"]["passed"] == 2
    assert "verified: `python3 -m pytest -q even_test.py` (2 passed)" in stderr


def test_tests_changed_to_pass_are_run_as_they_were(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"even.py": WRONG, "even_test.py": TESTS})
    rewrite = "def test_nothing():\n    assert True\n"
    # The agent's own command rewrites the tests (approved with --yes on the host).
    sed = Reply(
        tool_calls=[("run_shell", json.dumps({"command": f"printf '{rewrite}' > even_test.py"}))]
    )
    code, result, stderr = run(ws, [sed, Reply(text="All tests pass.")], "--yes")
    assert code == 3, stderr
    assert result["check"]["verdict"] == "failed" and "test_three" in result["check"]["detail"]


def test_a_fix_that_changed_nothing_over_failing_tests_fails(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"even.py": WRONG, "even_test.py": TESTS})
    code, result, _ = run(ws, [Reply(text="Fixed: the tests pass now.")])
    assert code == 3 and result["check"]["verdict"] == "failed"
    # It changed nothing, so its gate ran no check: the run's end stamps the answer.
    assert result["answer"].startswith("Fixed: the tests pass now.\n\nCheck: failed: `python3")
    assert result["result"] == "Fixed: the tests pass now."


def test_a_project_with_nothing_to_check_is_unchecked(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"notes.md": "notes\n"})
    replies = [read_then_write("notes.md", "tidy notes\n"), Reply(text="Tidied.")]
    code, result, _ = run(ws, replies, task="Tidy the notes.")
    assert code == 0 and result["verified"] is False
    assert result["check"]["verdict"] == "unchecked"
    strict, _, _ = run(ws, [*replies], "--require-verified", task="Tidy the notes.")
    assert strict == 4


def test_the_flag_and_the_config_name_the_check(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"even.py": WRONG, "even_test.py": TESTS})
    fix = [read_then_write("even.py", RIGHT), Reply(text="Fixed.")]
    task = "Fix is_even."
    code, result, _ = run(ws, fix, "--check", "python3 -m pytest -q", task=task)
    assert code == 0 and result["check"]["source"] == "flag"
    config = tmp_path / "home" / ".config" / "gaffer"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('check = "python3 -m pytest -q even_test.py"\n')
    code, result, _ = run(ws, [read_then_write("even.py", WRONG), Reply(text="Done.")], task=task)
    assert code == 3 and result["check"]["source"] == "config"
