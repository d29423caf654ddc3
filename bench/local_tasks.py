"""Small coding tasks solved by `gaffer run` with the local model, each in a fresh workspace.

Each task is run as a user would (`gaffer run --profile coder`, the coder working in its
Docker container) and judged by running the task's own tests on the host afterwards:
the model's word counts for nothing. Printed: solved or not, tokens, wall time, tool calls.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import Row
from supervisor.local import server, store
from workers.sandbox import SandboxUnavailable, docker

USER_UID = 1000
MAX_STEPS = 12
MAX_SECONDS = 360


@dataclass(frozen=True)
class Task:
    name: str
    prompt: str
    files: dict[str, str]
    check: list[str]


TASKS = [
    Task(
        name="implement a function against its tests",
        prompt="Implement is_prime(n) in mathx.py so that the tests in test_mathx.py pass. Run the tests with: python3 -m pytest -q",
        files={
            "mathx.py": 'def is_prime(n: int) -> bool:\n    """True when n is a prime number."""\n    raise NotImplementedError\n',
            "test_mathx.py": (
                "from mathx import is_prime\n\n\n"
                "def test_small():\n    assert [n for n in range(20) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19]\n\n\n"
                "def test_negative_and_large():\n    assert not is_prime(-7)\n    assert is_prime(7919)\n    assert not is_prime(7917)\n"
            ),
        },
        check=[sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
    ),
    Task(
        name="fix a bug",
        prompt="The tests in test_calc.py fail. Find the bug in calc.py and fix it. Run the tests with: python3 -m pytest -q",
        files={
            "calc.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
            "test_calc.py": "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
        },
        check=[sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
    ),
    Task(
        name="rename across files",
        prompt="Rename the function get_usr to get_user everywhere: in util.py, main.py and report.py. Run the tests with: python3 -m pytest -q",
        files={
            "util.py": 'def get_usr(user_id):\n    return {"id": user_id, "name": f"user{user_id}"}\n',
            "main.py": "from util import get_usr\n\n\ndef main():\n    return get_usr(1)\n",
            "report.py": 'from util import get_usr\n\n\ndef report(ids):\n    return [get_usr(i)["name"] for i in ids]\n',
            "test_rename.py": (
                "import pathlib\n\nfrom main import main\nfrom report import report\nfrom util import get_user\n\n\n"
                "def test_renamed():\n    assert get_user(2)['id'] == 2 and main()['id'] == 1 and report([3]) == ['user3']\n"
                "    assert not any('get_usr' in p.read_text() for p in pathlib.Path('.').glob('*.py') if p.name != 'test_rename.py')\n"
            ),
        },
        check=[sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
    ),
]


@dataclass(frozen=True)
class Outcome:
    solved: bool
    tokens: int
    wall_s: float
    tool_calls: int
    status: str


def run_task(task: Task) -> Outcome:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        for name, text in task.files.items():
            (workspace / name).write_text(text)
        if os.geteuid() == 0:  # the coder's container runs as the workspace owner, never root
            for path in [workspace, *workspace.iterdir()]:
                os.chown(path, USER_UID, USER_UID)
        env = {**os.environ, "GAFFER_LOG_DIR": str(Path(tmp) / "logs")}
        started = time.monotonic()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "supervisor",
                "run",
                "--local",
                "--profile",
                "coder",
                "--quiet",
                "--max-steps",
                str(MAX_STEPS),
                "--max-seconds",
                str(MAX_SECONDS),
                task.prompt,
            ],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=MAX_SECONDS + 120,
        )
        wall = time.monotonic() - started
        solved = (
            subprocess.run(task.check, cwd=workspace, capture_output=True, timeout=120).returncode
            == 0
        )
        (log,) = (Path(tmp) / "logs").glob("*.jsonl")
        end = next(
            (
                json.loads(line)
                for line in reversed(log.read_text().splitlines())
                if '"session_end"' in line
            ),
            {},
        )
    return Outcome(
        solved,
        int(end.get("tokens", 0)),
        wall,
        int(end.get("tool_calls", 0)),
        str(end.get("status", "?")),
    )


def run() -> list[Row]:
    try:
        docker.check_image(docker.client(), "gaffer-sandbox:latest")
        server.check_machine()
        store.pull()
    except (SandboxUnavailable, server.LocalUnavailable, store.PullError) as error:
        return [Row(f"local model tasks: skipped ({error})", 0, "")]
    # One server for all tasks, found by each `gaffer run --local` as a user's would be.
    left_running = server.running() is not None
    if not left_running:
        server.start(detach=True)
    rows: list[Row] = []
    solved = 0
    try:
        for task in TASKS:
            outcome = run_task(task)
            solved += outcome.solved
            label = f"local model: {task.name}"
            rows += [
                Row(f"{label}: solved ({outcome.status})", int(outcome.solved), "yes=1"),
                Row(f"{label}: tokens", outcome.tokens, "tokens"),
                Row(f"{label}: wall time", round(outcome.wall_s, 1), "s"),
                Row(f"{label}: tool calls", outcome.tool_calls, "calls"),
            ]
    finally:
        if not left_running:
            server.stop_running()
    rows.append(Row("local model: tasks solved", solved, f"of {len(TASKS)}"))
    return rows
