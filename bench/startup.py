"""How long `gaffer --help` takes, warm: what every command pays before it does anything.

Run as a user runs it (the installed entry point, a fresh process each time); the median
of several runs after one to warm the file cache. A `python -c pass` in the same run is
the floor no command can go under.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import Row

RUNS = 7
TARGET_S = 0.3


def _seconds(command: list[str]) -> float:
    times = []
    for attempt in range(RUNS + 1):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        if attempt:  # the first run warms the cache
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def run() -> list[Row]:
    gaffer = shutil.which("gaffer") or str(Path(sys.executable).parent / "gaffer")
    floor = _seconds([sys.executable, "-c", "pass"])
    help_s = _seconds([gaffer, "--help"])
    return [
        Row("python startup (the floor)", round(floor, 3), "s"),
        Row("gaffer --help, warm", round(help_s, 3), "s", f"≤ {TARGET_S}", help_s <= TARGET_S),
    ]
