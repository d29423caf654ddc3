"""`make bench-agent`: small Python exercises solved by the local model, with and without gaffer.

Each exercise (bench/exercises/<name>/) has its instructions (task.md), its code (a stub
to fill in, or a small project with a bug or a missing feature) and a unittest file; its
reference solution (solution/, the files it changes) never enters the workspace. Three
ways are measured in the same run, each in a fresh workspace:

- gaffer: `gaffer run --local --profile coder` with the instructions, as a user would; the
  coder reads, edits and runs the tests in its Docker container.
- one shot, task only: the same model, no tools, given the instructions as gaffer is,
  asked for the new content of each file it changes in one reply.
- one shot, files shown: the same, with every file of the workspace pasted under the
  instructions: what a user could paste into a chat, and an upper bound on one shot.

Both one-shot replies are applied with gaffer's own file-block reader
(workers/aids/file_blocks.py), so a reply counts the way it would count in gaffer.

An exercise counts as solved only when its tests pass on the host afterwards; what the
model says counts for nothing. Printed per exercise: solved, tokens, wall time, and for
gaffer its exit code and its check's verdict; per way, how often gaffer exited 0 over
tests that fail on the host (what the check exists to make 0).

The held-out suite's tasks come in three wordings, each run by gaffer: the bench's own
(the command on a line of its own), the command in parentheses mid-sentence, and no
command at all (bench/heldout.py WORDINGS). A wording gaffer handles worse than another
is a rule over the task's prose.

Two suites, side by side: ours (bench/exercises/, written here) and the held-out one
(bench/heldout.py: made at bench time from functions on this machine that nobody here
wrote). A change that helps ours and not the held-out one is tuning, not progress.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.kept_results import KeptResults, OtherGaffer, measured_commit
from supervisor.local import server, store
from workers.aids.file_blocks import HOW_TO_WRITE, read_blocks
from workers.guards.editing import EditGuard
from workers.model.openai_client import OpenAIModel
from workers.sandbox import SandboxUnavailable, docker
from workers.tools.workspace import resolve

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

    def wordings(self) -> dict[str, str]:
        """The task in the bench's own words, and as others word it (task.<wording>.md)."""
        found = {"own words": self.task}
        for path in sorted(self.folder.glob("task.*.md")):
            found[path.name.removeprefix("task.").removesuffix(".md")] = path.read_text().strip()
        return found

    def files(self) -> list[Path]:
        """What a workspace is given: the code and its tests, never the solution."""
        return sorted(self.folder.glob("*.py"))

    def solution(self) -> list[Path]:
        """The files the reference solution changes, as they are once changed."""
        return sorted((self.folder / "solution").glob("*.py"))


@dataclass(frozen=True)
class Result:
    solved: bool
    tokens: int
    wall_s: float
    detail: str = ""
    model_calls: int = 1
    exit_code: int | None = None
    """gaffer's exit code; None for a one-shot answer."""
    verdict: str = ""
    """gaffer's check: verified, failed, timed_out, unchecked; "" when it ran none."""

    @property
    def false_done(self) -> bool:
        """gaffer exited 0 while the tests fail on the host: the failure this bench exists
        to catch (issue 42: 4 of 10 held-out runs did)."""
        return self.exit_code == 0 and not self.solved


def exercises(root: Path = EXERCISES) -> list[Exercise]:
    return [Exercise(p.name, p) for p in sorted(root.iterdir()) if (p / "task.md").is_file()]


def heldout_exercises(root: Path) -> list[Exercise]:
    """The held-out suite, written under `root` (bench/heldout.py says how it is drawn)."""
    from bench import heldout

    for found in heldout.chosen():
        heldout.write_exercise(found, root)
    return exercises(root)


def passes(workspace: Path) -> bool:
    """Whether the exercise's tests pass on what the run left. A solution that hangs
    (`sliced` written as a loop that never ends) has not solved it: its run is killed at
    the timeout, and the bench goes on."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
            cwd=workspace,
            capture_output=True,
            timeout=SCORING_SECONDS,
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


SCORING_SECONDS = 120


def fresh_workspace(exercise: Exercise, root: Path) -> Path:
    workspace = root / "ws"
    workspace.mkdir()
    for path in exercise.files():
        shutil.copy(path, workspace / path.name)
    if os.geteuid() == 0:  # the coder's container runs as the workspace owner, never root
        for path in [workspace, *workspace.iterdir()]:
            os.chown(path, USER_UID, USER_UID)
    return workspace


def with_gaffer(exercise: Exercise, wording: str = "own words") -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = fresh_workspace(exercise, Path(tmp))
        env = {**os.environ, "GAFFER_LOG_DIR": str(Path(tmp) / "logs")}
        started = time.monotonic()
        command = ["run", "--local", "--profile", "coder", "--output-format", "json"]
        command += ["--max-steps", str(MAX_STEPS), "--max-seconds", str(MAX_SECONDS)]
        task = exercise.wordings().get(wording)
        if task is None:
            return Result(False, 0, 0.0, "no such wording")
        done = subprocess.run(
            [sys.executable, "-m", "supervisor", *command, task],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=MAX_SECONDS + 120,
        )
        wall = time.monotonic() - started
        for log in (Path(tmp) / "logs").glob("*.jsonl"):  # kept to read what it did
            KEPT_LOGS.mkdir(parents=True, exist_ok=True)
            shutil.copy(log, KEPT_LOGS / f"{exercise.name}.{wording.replace(' ', '-')}.jsonl")
        records = _records(Path(tmp) / "logs")
        end = next((r for r in reversed(records) if r.get("event") == "session_end"), {})
        calls = sum(r.get("event") == "llm_call" for r in records)
        tokens = int(str(end.get("tokens", 0)))
        try:
            check = json.loads(done.stdout).get("check") or {}
        except ValueError:
            check = {}
        verdict = str(check.get("verdict") or "")
        detail = f"exit {done.returncode}" + (f", {verdict}" if verdict else "")
        solved = passes(workspace)
        return Result(solved, tokens, wall, detail, calls, done.returncode, verdict)


# The same words and example gaffer's agents get (workers/aids/file_blocks.py).
ONE_SHOT_ASK = HOW_TO_WRITE


def one_shot(exercise: Exercise, model: OpenAIModel, *, files_shown: bool) -> Result:
    prompt = exercise.task
    if files_shown:
        prompt += "\n\n" + "\n\n".join(
            f"{p.name}\n```python\n{p.read_text()}```" for p in exercise.files()
        )
    started = time.monotonic()
    turn = model.complete([{"role": "user", "content": f"{prompt}\n\n{ONE_SHOT_ASK}"}], [])
    wall = time.monotonic() - started
    KEPT_LOGS.mkdir(parents=True, exist_ok=True)
    kept = KEPT_LOGS / f"{exercise.name}.one-shot-{'files' if files_shown else 'task'}.txt"
    kept.write_text(f"{prompt}\n\n{ONE_SHOT_ASK}\n\n---- reply ----\n\n{turn.text}")
    with tempfile.TemporaryDirectory() as tmp:
        workspace = fresh_workspace(exercise, Path(tmp))
        guard = EditGuard(workspace)
        guard.seen.update((p.name, "") for p in exercise.files())  # its files, by name
        found = read_blocks(turn.text, guard, "one-shot")
        writes = found.calls
        for call in writes:
            arguments = json.loads(call.arguments)
            target = resolve(workspace, arguments["path"])
            target.write_text(arguments["content"])
        solved = bool(writes) and passes(workspace)
    detail = "" if writes else ("changed nothing" if found.unchanged else "no file in the reply")
    return Result(solved, turn.usage.total, wall, detail)


def _records(logs: Path) -> list[dict[str, object]]:
    return [
        dict(json.loads(line))
        for log in logs.glob("*.jsonl")
        for line in log.read_text().splitlines()
        if line.strip()
    ]


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.agent_tasks",
        description="gaffer against one-shot answers on coding exercises, scored by their tests.",
    )
    parser.add_argument("names", nargs="*", help="only these exercises (default: every one)")
    parser.add_argument("--suite", choices=("both", "ours", "heldout"), default="both")
    parser.add_argument(
        "--gaffer-only",
        action="store_true",
        help="skip the one-shot ways (to measure another gaffer, found through PYTHONPATH)",
    )
    parser.add_argument(
        "--results",
        type=Path,
        help="keep each result in this JSON-lines file as it comes, and skip what it holds "
        "for this gaffer's commit: a run longer than one sitting goes on where it stopped",
    )
    chosen_args = parser.parse_args(args)
    suite, names = chosen_args.suite, chosen_args.names
    try:
        kept = KeptResults(chosen_args.results, measured_commit())
    except OtherGaffer as error:
        print(f"bench-agent: {error}", file=sys.stderr)
        return 64
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
    one_shots: dict[str, Callable[[Exercise], Result]] = {
        "one shot, task only": functools.partial(one_shot, model=model, files_shown=False),
        "one shot, files shown": functools.partial(one_shot, model=model, files_shown=True),
    }
    if chosen_args.gaffer_only:
        one_shots = {}
    summaries = []
    try:
        with tempfile.TemporaryDirectory() as made:
            # the held-out suite first: the one that says whether a change carries over
            suites = {"held-out": heldout_exercises(Path(made)), "ours": exercises()}
            if suite != "both":
                suites = {k: v for k, v in suites.items() if k.startswith(suite[:4])}
            for title, every in suites.items():
                chosen = [e for e in every if not names or e.name in names]
                ways = {**_gaffer_ways(chosen), **one_shots}
                results = run_suite(chosen, ways, kept, title)
                print_table(f"{title}: {len(chosen)} exercises", chosen, results)
                summaries.append((title, results))
    finally:
        if not left_running:
            server.stop_running()
    print_summary(summaries)
    return 0


def _gaffer_ways(chosen: list[Exercise]) -> dict[str, Callable[[Exercise], Result]]:
    """gaffer once per wording the suite has: the held-out one's tasks come in three."""
    wordings = dict.fromkeys(w for e in chosen for w in e.wordings())
    if list(wordings) == ["own words"]:
        return {"gaffer": with_gaffer}
    return {f"gaffer, {w}": functools.partial(with_gaffer, wording=w) for w in wordings}


def run_suite(
    chosen: list[Exercise],
    ways: dict[str, Callable[[Exercise], Result]],
    kept: KeptResults | None = None,
    suite: str = "",
) -> dict[str, list[Result]]:
    """Each exercise each way; what `kept` holds already is not run again."""
    kept = kept or KeptResults(None, "")
    results: dict[str, list[Result]] = {way: [] for way in ways}
    for exercise in chosen:
        for way, attempt in ways.items():
            if (earlier := kept.get(suite, exercise.name, way)) is not None:
                results[way].append(Result(**earlier))
                continue
            results[way].append(attempt(exercise))
            kept.keep(suite, exercise.name, way, results[way][-1])
        shown = ", ".join(f"{way} {runs[-1]}" for way, runs in results.items())
        print(f"{exercise.name}: {shown}", file=sys.stderr)
    return results


def print_summary(summaries: list[tuple[str, dict[str, list[Result]]]]) -> None:
    """Each suite in a row, each way's solved count with tokens and seconds per solved task."""
    table = Table(title="both suites, side by side (per solved task: tokens, seconds)")
    table.add_column("suite")
    ways = list(dict.fromkeys(way for _, results in summaries for way in results))
    for way in ways:
        table.add_column(way)
        table.add_column("tok/solved", justify="right")
        table.add_column("s/solved", justify="right")
    for title, results in summaries:
        row = [title]
        for way in ways:
            runs = results.get(way)
            if runs is None:
                row += ["-", "-", "-"]
                continue
            solved = sum(r.solved for r in runs)
            tokens, seconds = sum(r.tokens for r in runs), sum(r.wall_s for r in runs)
            row += [f"{solved} of {len(runs)}"]
            row += [f"{tokens // solved:,}", f"{seconds / solved:.0f}"] if solved else ["-", "-"]
        table.add_row(*row)
    Console(highlight=False, width=180).print(table)


def print_table(title: str, chosen: list[Exercise], results: dict[str, list[Result]]) -> None:
    table = Table(title=f"agent tasks, {title}: the local model (Qwen2.5-Coder-1.5B, 2 threads)")
    table.add_column("exercise")
    for way in results:
        table.add_column(way)
        table.add_column("tokens", justify="right")
        table.add_column("wall s", justify="right")
    for index, exercise in enumerate(chosen):
        row = [exercise.name]
        for runs in results.values():
            run = runs[index]
            outcome = "solved" if run.solved else "no"
            row += [f"{outcome} ({run.detail})" if run.detail else outcome]
            row += [f"{run.tokens:,}", f"{run.wall_s:.0f}"]
        table.add_row(*row)
    summary = ["solved"]
    for runs in results.values():
        solved = sum(r.solved for r in runs)
        tokens = sum(r.tokens for r in runs)
        summary += [f"{solved} of {len(runs)}", f"{tokens:,}", f"{sum(r.wall_s for r in runs):.0f}"]
    table.add_row(*summary)
    false_done = ["exit 0 over failing tests"]
    for runs in results.values():
        gaffer = any(r.exit_code is not None for r in runs)
        false_done += [str(sum(r.false_done for r in runs)) if gaffer else "-", "", ""]
    table.add_row(*false_done)
    per_solved, per_call = ["per solved task: tokens, seconds"], ["tokens per model call"]
    for runs in results.values():
        solved, tokens = sum(r.solved for r in runs), sum(r.tokens for r in runs)
        seconds = sum(r.wall_s for r in runs)
        per_solved += ["", f"{tokens // solved:,}" if solved else "-"]
        per_solved += [f"{seconds / solved:.0f}" if solved else "-"]
        per_call += ["", f"{tokens // max(1, sum(r.model_calls for r in runs)):,}", ""]
    table.add_row(*per_solved)
    table.add_row(*per_call)
    Console(highlight=False, width=180).print(table)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
