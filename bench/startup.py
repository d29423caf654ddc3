"""What every command pays before it does anything: `gaffer --help`, and a trivial
`gaffer run` against an endpoint that answers at once, each beside `python -c pass` in
the same run (the floor no command can go under; the ratio is the figure to compare on
a shared machine) and beside `python -c "import openai"` (what the SDK alone costs: a run
imports it at its first model call, `--help` never).

Run as a user runs it (the installed entry point, a fresh process each time); the median
of several runs after one to warm the file cache (and, as on a user's
machine, write the bytecode). CPU time is the child's own, user and
system together.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Row, size
from tests.fake_openai import FakeOpenAI, Reply

RUNS = 7
HELP_TARGET_S = 0.25
RUN_TARGET_S = 0.7


def _as_a_user(env: dict[str, str]) -> dict[str, str]:
    """`env` as on a user's machine: some sandboxes set PYTHONDONTWRITEBYTECODE, which
    makes every run of an editable install compile its changed sources again; a user's
    first run writes the bytecode, as the warming run does here."""
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _timed(
    command: list[str], runs: int, env: dict[str, str] | None = None, **kwargs: object
) -> tuple[float, float]:
    """Median wall and CPU seconds of `command`, after one run that warms the caches."""
    walls, cpus = [], []
    env = _as_a_user(dict(os.environ) if env is None else env)
    for attempt in range(runs + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=env, **kwargs)  # type: ignore[call-overload]
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if attempt:
            walls.append(wall)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def _trivial_run(gaffer: str, runs: int) -> tuple[float, float]:
    """`gaffer run "hello there"` in an empty workspace, the endpoint answering at once."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeOpenAI([Reply(text="Hello.")] * (runs + 1)) as server,
    ):
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GAFFER_"))},
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "k",
            "HOME": tmp,
            "XDG_STATE_HOME": str(Path(tmp, "state")),
            "XDG_CONFIG_HOME": str(Path(tmp, "config")),
        }
        workspace = Path(tmp, "ws")
        workspace.mkdir()
        return _timed([gaffer, "run", "hello there"], runs, cwd=workspace, env=env)


def run() -> list[Row]:
    runs = size(RUNS, 1)
    gaffer = shutil.which("gaffer") or str(Path(sys.executable).parent / "gaffer")
    floor, _ = _timed([sys.executable, "-c", "pass"], runs)
    sdk, _ = _timed([sys.executable, "-c", "import openai"], runs)
    help_s, help_cpu = _timed([gaffer, "--help"], runs)
    run_s, run_cpu = _trivial_run(gaffer, runs)
    return [
        Row("python -c pass (the floor)", round(floor, 3), "s"),
        Row('python -c "import openai"', round(sdk, 3), "s"),
        Row(
            "gaffer --help, warm",
            round(help_s, 3),
            "s",
            f"≤ {HELP_TARGET_S}",
            help_s <= HELP_TARGET_S,
        ),
        Row("gaffer --help / python -c pass", round(help_s / floor, 2), "ratio"),
        Row("gaffer --help, CPU", round(help_cpu, 3), "s"),
        Row(
            "gaffer run, trivial, instant endpoint",
            round(run_s, 3),
            "s",
            f"≤ {RUN_TARGET_S}",
            run_s <= RUN_TARGET_S,
        ),
        Row("gaffer run, trivial / python -c pass", round(run_s / floor, 2), "ratio"),
        Row('gaffer run, trivial / python -c "import openai"', round(run_s / sdk, 2), "ratio"),
        Row("gaffer run, trivial, CPU", round(run_cpu, 3), "s"),
    ]
