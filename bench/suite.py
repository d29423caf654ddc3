"""`make bench`'s benchmarks, in the order they run, and the table they print."""

from __future__ import annotations

import platform

from rich.console import Console
from rich.table import Table

from bench import (
    cluster,
    log_throughput,
    loop_overhead,
    parallel_readers,
    prompt_tokens,
    repo_map,
    sandbox,
    snapshots,
    startup,
)
from bench.common import Row

BENCHMARKS = [
    startup,
    loop_overhead,
    parallel_readers,
    sandbox,
    log_throughput,
    prompt_tokens,
    snapshots,
    repo_map,
    cluster,
]


def main() -> int:
    rows: list[Row] = []
    for bench in BENCHMARKS:
        rows.extend(bench.run())
    table = Table(
        title=f"gaffer benchmarks · {platform.node()} · {platform.processor() or platform.machine()}"
    )
    for column in ("measure", "value", "unit", "target", "met"):
        table.add_column(column, justify="right" if column == "value" else "left")
    for row in rows:
        met = "" if row.ok is None else ("yes" if row.ok else "NO")
        table.add_row(row.name, f"{row.value:g}", row.unit, row.target, met)
    Console(highlight=False, width=120).print(table)
    return 0 if all(row.ok is not False for row in rows) else 1
