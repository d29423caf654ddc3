"""A benchmark's results kept as they come, so a run longer than one sitting goes on
where it stopped and still prints one table.

`make bench-agent` on the bundled model takes about three and a half hours on two cores
(ten held-out exercises in three wordings, many of them at the 420 s limit, then our
eighteen). Each result is written to a JSON-lines file as soon as it is measured, with
the commit of the gaffer it measured; started again with the same file, the bench skips
what the file holds for that commit and measures the rest. A file of another commit (or
of a tree with uncommitted changes) is refused: one table is one gaffer.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class OtherGaffer(Exception):
    """The results file holds another gaffer's results."""


def measured_commit(root: Path = ROOT) -> str:
    """The commit of the gaffer this bench measures; "+dirty" when its tree has changes
    (such results cannot be taken up again by another sitting)."""
    head = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    status = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return head + ("+dirty" if status.strip() else "")


class KeptResults:
    """The file's results for one gaffer, by (suite, exercise, way), and more as they come."""

    def __init__(self, path: Path | None, commit: str) -> None:
        self.path, self.commit = path, commit
        self.done: dict[tuple[str, str, str], dict[str, Any]] = {}
        if path is None or not path.exists():
            return
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            kept = json.loads(line)
            if kept.get("commit") != commit or commit.endswith("+dirty"):
                raise OtherGaffer(
                    f"{path}:{number} holds results of {kept.get('commit')}; this gaffer is "
                    f"{commit}: give another file, or measure that commit"
                )
            self.done[(kept["suite"], kept["exercise"], kept["way"])] = kept["result"]

    def get(self, suite: str, exercise: str, way: str) -> dict[str, Any] | None:
        return self.done.get((suite, exercise, way))

    def keep(self, suite: str, exercise: str, way: str, result: object) -> None:
        fields = dataclasses.asdict(result)  # type: ignore[call-overload]
        self.done[(suite, exercise, way)] = fields
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = {"commit": self.commit, "suite": suite, "exercise": exercise, "way": way}
        with self.path.open("a") as out:
            out.write(json.dumps({**line, "result": fields}) + "\n")
