"""`make bench-agent`: small Python exercises solved by the local model, with and without gaffer.

Each exercise (bench/exercises/<name>/) has its instructions (task.md), a stub, and a
unittest file; its reference solution (solution/) never enters the workspace. Two ways
are measured in the same run, each in a fresh workspace:

- gaffer: `gaffer run --local --profile coder` with the instructions, as a user would; the
  coder reads, edits and runs the tests in its Docker container.
- one shot: the same model, no tools, shown the instructions, the stub and the tests, and
  asked for the whole new file in one reply.

An exercise counts as solved only when its tests pass on the host afterwards; what the
model says counts for nothing. Printed per exercise: solved, tokens, wall time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from supervisor.local import server, store
from workers.model.openai_client import OpenAIModel
from workers.sandbox import SandboxUnavailable, docker

EXERCISES = Path(__file__).with_name("exercises")
KEPT_LOGS = Path(tempfile.gettempdir()) / "gaffer-bench-agent"
USER_UID = 1000
MAX_STEPS = 15
MAX_SECONDS = 420
# The one-shot answer is a whole file: room for the longest reference solution.
ONE_SHOT_TOKENS = 1024
_CODE_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Exercise:
    name: str
    folder: Path

    @property
    def task(self) -> str:
        return (self.folder / "task.md").read_text().strip()

    @property
    def module(self) -> Path:
        return next(p for p in self.folder.glob("*.py") if not p.name.startswith("test_"))

    def files(self) -> list[Path]:
        return sorted(self.folder.glob("*.py"))


@dataclass(frozen=True)
class Result:
    solved: bool
    tokens: int
    wall_s: float
    detail: str = ""


def exercises() -> list[Exercise]:
    return [Exercise(p.name, p) for p in sorted(EXERCISES.iterdir()) if (p / "task.md").is_file()]


def passes(workspace: Path) -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=workspace,
        capture_output=True,
        timeout=120,
    )
    return done.returncode == 0


def fresh_workspace(exercise: Exercise, root: Path) -> Path:
    workspace = root / "ws"
    workspace.mkdir()
    for path in exercise.files():
        shutil.copy(path, workspace / path.name)
    if os.geteuid() == 0:  # the coder's container runs as the workspace owner, never root
        for path in [workspace, *workspace.iterdir()]:
            os.chown(path, USER_UID, USER_UID)
    return workspace


def with_gaffer(exercise: Exercise) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = fresh_workspace(exercise, Path(tmp))
        env = {**os.environ, "GAFFER_LOG_DIR": str(Path(tmp) / "logs")}
        started = time.monotonic()
        command = ["run", "--local", "--profile", "coder", "--quiet"]
        command += ["--max-steps", str(MAX_STEPS), "--max-seconds", str(MAX_SECONDS)]
        subprocess.run(
            [sys.executable, "-m", "supervisor", *command, exercise.task],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=MAX_SECONDS + 120,
        )
        wall = time.monotonic() - started
        for log in (Path(tmp) / "logs").glob("*.jsonl"):  # kept to read what it did
            KEPT_LOGS.mkdir(parents=True, exist_ok=True)
            shutil.copy(log, KEPT_LOGS / f"{exercise.name}.jsonl")
        end = _session_end(Path(tmp) / "logs")
        return Result(passes(workspace), int(end.get("tokens", 0)), wall, str(end.get("status")))


def one_shot(exercise: Exercise, model: OpenAIModel) -> Result:
    shown = "\n\n".join(f"{p.name}:\n```python\n{p.read_text()}```" for p in exercise.files())
    prompt = (
        f"{exercise.task}\n\n{shown}\n\nReply with the complete new content of "
        f"{exercise.module.name} in one python code block, and nothing else."
    )
    started = time.monotonic()
    turn = model.complete([{"role": "user", "content": prompt}], [])
    wall = time.monotonic() - started
    blocks = _CODE_BLOCK.findall(turn.text)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = fresh_workspace(exercise, Path(tmp))
        if blocks:
            (workspace / exercise.module.name).write_text(blocks[0])
        solved = bool(blocks) and passes(workspace)
    return Result(solved, turn.usage.total, wall, "" if blocks else "no code block")


def _session_end(logs: Path) -> dict[str, object]:
    for log in logs.glob("*.jsonl"):
        for line in reversed(log.read_text().splitlines()):
            if '"session_end"' in line:
                return dict(json.loads(line))
    return {}


def main(names: list[str]) -> int:
    """Every exercise, or those named (`python -m bench.agent_tasks roman stack`)."""
    chosen = [e for e in exercises() if not names or e.name in names]
    try:
        docker.check_image(docker.client(), "gaffer-sandbox:latest")
        server.check_machine()
        store.pull()
    except (SandboxUnavailable, server.LocalUnavailable, store.PullError) as error:
        print(f"bench-agent: cannot run here: {error}", file=sys.stderr)
        return 1
    # One server for everything, found by each `gaffer run --local` as a user's would be.
    left_running = server.running() is not None
    if not left_running:
        server.start(detach=True)
    found = server.running()
    assert found is not None
    model = OpenAIModel(
        model=found.model,
        base_url=found.base_url,
        api_key=None,
        max_output_tokens=ONE_SHOT_TOKENS,
        temperature=0.0,
    )
    table = Table(title="agent tasks: the local model (Qwen2.5-Coder-1.5B, 2 threads)")
    for column in ("exercise", "gaffer", "tokens", "wall s", "one shot", "tokens", "wall s"):
        table.add_column(column)
    totals = {"gaffer": 0, "one_shot": 0}
    tokens = {"gaffer": 0, "one_shot": 0}
    try:
        for exercise in chosen:
            agent, single = with_gaffer(exercise), one_shot(exercise, model)
            totals["gaffer"] += agent.solved
            totals["one_shot"] += single.solved
            tokens["gaffer"] += agent.tokens
            tokens["one_shot"] += single.tokens
            table.add_row(
                exercise.name,
                f"{'solved' if agent.solved else 'no'} ({agent.detail})",
                str(agent.tokens),
                f"{agent.wall_s:.0f}",
                "solved" if single.solved else f"no {single.detail}".strip(),
                str(single.tokens),
                f"{single.wall_s:.0f}",
            )
            print(f"{exercise.name}: gaffer {agent}, one shot {single}", file=sys.stderr)
    finally:
        if not left_running:
            server.stop_running()
    count = len(chosen)
    table.add_row(
        "solved",
        f"{totals['gaffer']} of {count}",
        str(tokens["gaffer"]),
        "",
        f"{totals['one_shot']} of {count}",
        str(tokens["one_shot"]),
        "",
    )
    Console(highlight=False, width=140).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
