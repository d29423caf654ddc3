"""`make bench-delegation`: does splitting a job across workers pay, on code nobody here wrote?

Survey. The installed source of four of gaffer's own dependencies, copied to a temporary
workspace, and questions whose answer is a file: the file that defines a named symbol,
found in the copy by its syntax tree when the bench runs, so a new version of the package
moves the answer with it. The question describes what the file does and never names the
symbol; a script scores it, never a model. The packages: click and tenacity (the first
two), and, by a rule written before any result, the two largest pure-Python packages
`make install` installs besides those, by bytes of Python source in the installed
distribution (on 2026-12-04: pygments, 4.5 MB, and pydantic, 1.8 MB). Ways:

- the default top agent (`gaffer run --read-only`: on the bundled model, the
  dispatcher, delegating);
- one explorer alone (`--profile explorer`);
- one call: the same model given the repo map (workers/repo_map/, ranked toward the
  questions, at the bundled model's room for it) and the questions, no tools.

Each row says the right answers, wall time, tokens, workers and the most at once, the
prompt tokens the server had cached, the claims gaffer marked or sent back as
unsupported, and how many of the right answers were only under gaffer's "Unchecked"
line (a first answer, from a search of the code, that no worker's answer had).

Refactor. A generated project of 12 modules where `scale(value)`, used by 9 of them, is
renamed `scale_by(value, factor)`; its tests decide. Ways: the default top agent with
isolated coders (`--isolate`), and one coder alone (`--profile coder`).

It runs on the bundled model by default; `--base-url URL --model NAME` (key in
OPENAI_API_KEY) measures any endpoint the same way. `--only survey|refactor` runs one half.
BENCH_PACKAGES=requests,structlog (or trio,_pytest) runs the survey on two packages whose
questions were held out from any tuning (HELD_OUT).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
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
from typing import Any

from bench.refactor_project import TASK as REFACTOR_TASK
from bench.refactor_project import write_project, write_tests
from supervisor.local import server, store
from workers.aids.joined_reports import UNCHECKED
from workers.guards.citations import UNSUPPORTED
from workers.model.openai_client import OpenAIModel
from workers.repo_map.index import build
from workers.repo_map.ranking import map_chars, rendered
from workers.sandbox import SandboxUnavailable, docker

SURVEY_SECONDS = 360
REFACTOR_SECONDS = 600
KEPT = Path(tempfile.gettempdir()) / "gaffer-bench-delegation"
USER_UID = 1000

# (package, [(question, symbol whose defining file is the answer)]).
SURVEYS: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "click",
        [
            (
                "Which file defines the object that holds the state of one command invocation?",
                "Context",
            ),
            ("Which file draws the progress bar?", "ProgressBar"),
            (
                "Which file defines the parameter types such as integer ranges and choices?",
                "IntRange",
            ),
            ("Which file implements shell completion for bash?", "BashComplete"),
            (
                "Which file provides the runner that invokes commands in isolation for tests?",
                "CliRunner",
            ),
            ("Which file defines the error raised for a bad parameter value?", "BadParameter"),
            ("Which file lays out and wraps the text of help pages?", "HelpFormatter"),
            ("Which file defines the decorator that turns a function into a command?", "command"),
            ("Which file defines the function that prints styled, coloured text?", "secho"),
            ("Which file splits the command line into options and arguments?", "_OptionParser"),
        ],
    ),
    (
        "tenacity",
        [
            (
                "Which file defines when to stop retrying after a number of attempts?",
                "stop_after_attempt",
            ),
            (
                "Which file holds the wait strategies such as exponential backoff?",
                "wait_exponential",
            ),
            (
                "Which file decides whether to retry from the type of exception raised?",
                "retry_if_exception_type",
            ),
            ("Which file defines the function that sleeps between attempts?", "sleep_using_event"),
            ("Which file has the callback that logs before each attempt?", "before_log"),
            ("Which file has the callback that logs before sleeping?", "before_sleep_log"),
            ("Which file has the callback that logs after a failed attempt?", "after_log"),
            ("Which file supports retrying Tornado coroutines?", "TornadoRetrying"),
            ("Which file turns an attempt number into an ordinal such as 1st?", "to_ordinal"),
        ],
    ),
    (
        "pygments",
        [
            ("Which file defines the formatter that writes LaTeX?", "LatexFormatter"),
            ("Which file defines the lexer for JSON?", "JsonLexer"),
            (
                "Which file defines the base class of lexers built from regular expressions "
                "and states?",
                "RegexLexer",
            ),
            ("Which file defines the formatter that writes HTML?", "HtmlFormatter"),
            ("Which file defines the lexer for Python 3 code?", "PythonLexer"),
            (
                "Which file defines the hierarchy of token types such as Keyword and Name?",
                "_TokenType",
            ),
            ("Which file defines the metaclass of colour styles?", "StyleMeta"),
            ("Which file implements the pygmentize command-line program?", "main"),
            (
                "Which file defines the helper that checks a file's first line for an "
                "interpreter, such as #!/usr/bin/python?",
                "shebang_matches",
            ),
            ("Which file defines the formatter for 256-colour terminals?", "Terminal256Formatter"),
        ],
    ),
    (
        "pydantic",
        [
            ("Which file defines the base class that user models inherit from?", "BaseModel"),
            (
                "Which file defines the function that declares a model field with a default "
                "and constraints?",
                "Field",
            ),
            ("Which file defines the decorator that validates one field?", "field_validator"),
            (
                "Which file defines the error raised when pydantic itself is used wrongly?",
                "PydanticUserError",
            ),
            (
                "Which file defines the adapter that validates a value against any type, not "
                "only a model?",
                "TypeAdapter",
            ),
            ("Which file defines the typed dictionary of model settings?", "ConfigDict"),
            (
                "Which file defines the decorator that validates a function's arguments when "
                "it is called?",
                "validate_call",
            ),
            ("Which file defines the model with a single root value?", "RootModel"),
            ("Which file defines the string type whose value is hidden when printed?", "SecretStr"),
        ],
    ),
]

# Held out: written in session 6 of issue 43 before any result of the map's search on
# them, and never tuned on. Run with BENCH_PACKAGES=requests,structlog (not by default).
HELD_OUT: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "requests",
        [
            (
                "Where is the object that persists settings and cookies across several requests?",
                "Session",
            ),
            (
                "Which file has the transport adapter that sends requests through urllib3?",
                "HTTPAdapter",
            ),
            ("Which file defines the exception raised when a request times out?", "Timeout"),
            ("Which file implements HTTP basic authentication?", "HTTPBasicAuth"),
            ("Which file defines the dictionary whose keys ignore case?", "CaseInsensitiveDict"),
            ("Which file defines the object for a server's reply to a request?", "Response"),
            (
                "Which file works out the text encoding from the response headers?",
                "get_encoding_from_headers",
            ),
            ("Which file has the function that sends a GET request?", "get"),
            ("Which file handles cookie jars?", "RequestsCookieJar"),
        ],
    ),
    (
        "structlog",
        [
            ("Which file defines the processor that renders a log entry as JSON?", "JSONRenderer"),
            (
                "Which file has the renderer for colourful console output during development?",
                "ConsoleRenderer",
            ),
            (
                "Which file defines the formatter that lets the standard library's logging handlers use processors?",
                "ProcessorFormatter",
            ),
            ("Which file defines the function that configures structlog globally?", "configure"),
            (
                "Which file keeps context in context variables so it stays bound across a request?",
                "bind_contextvars",
            ),
            ("Which file defines the processor that adds a timestamp?", "TimeStamper"),
            (
                "Which file defines the logger that prints to a file or standard output without the standard library?",
                "PrintLogger",
            ),
            (
                "Which file holds the helpers for tests, such as capturing log entries?",
                "capture_logs",
            ),
            (
                "Which file makes the bound logger that filters by level before doing any work?",
                "make_filtering_bound_logger",
            ),
        ],
    ),
    # Written in session 9 of issue 43, before any result on them (the rule: the two
    # largest pure-Python packages in the venv other than those above, by source size,
    # under 2 MB); run with BENCH_PACKAGES=trio,_pytest.
    (
        "trio",
        [
            (
                "Where is the nursery that supervises a group of child tasks implemented?",
                "open_nursery",
            ),
            (
                "Which module has the timeout helpers that cancel a block of code after some seconds?",
                "move_on_after",
            ),
            ("Where does trio define its mutual-exclusion lock?", "Lock"),
            (
                "Which file creates a pair of channels for sending objects between tasks?",
                "open_memory_channel",
            ),
            ("Which file defines the object for a child process that is still running?", "Process"),
            (
                "Which file lets blocking code run in a worker thread without freezing the event loop?",
                "to_thread_run_sync",
            ),
            ("Where is the async wrapper around pathlib's path objects?", "Path"),
            ("Which file wraps a stream in TLS encryption?", "SSLStream"),
            ("Where is the clock you can control by hand in tests?", "MockClock"),
        ],
    ),
    (
        "_pytest",
        [
            ("Where is the decorator that marks a function as a fixture?", "fixture"),
            (
                "Which file has the helper that patches attributes and environment variables for one test?",
                "MonkeyPatch",
            ),
            (
                "Where is the code that compares floating point numbers within a tolerance?",
                "approx",
            ),
            (
                "Which module rewrites assert statements so failures show the values?",
                "AssertionRewritingHook",
            ),
            ("Where is the exception raised to skip a test from inside it?", "Skipped"),
            ("Which file captures what a test writes to stdout and stderr?", "CaptureFixture"),
            ("Where is the cache that remembers which tests failed last time?", "Cache"),
            ("Which file writes results in the JUnit XML format?", "LogXML"),
            ("Where is the fixture for asserting that code emits a warning?", "WarningsRecorder"),
        ],
    ),
]

ASK = (
    "Answer each question below about the code in this workspace with the path of one "
    "file. Reply as a numbered list, one line per question, the file path first.\n"
)


@dataclass
class Outcome:
    right: int
    of: int
    wall: float
    tokens: int
    workers: int = 0
    most_at_once: int = 0
    conflicts: int = 0
    status: str = ""
    cached: int = 0
    """Prompt tokens the server had cached, as it reported them."""
    unsupported: int = 0
    """Answers sent back as unsupported, and claims the answers went on marked so."""
    unchecked: int = 0
    """Of the right answers, those only under gaffer's "Unchecked (…)" line: a first
    answer, from a search of the code, that no worker's answer had (joined_reports.py)."""


def defining_file(root: Path, symbol: str) -> str | None:
    """The workspace path of the file whose top level defines `symbol`."""
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and (
                node.name == symbol
            ):
                return path.relative_to(root).as_posix()
    return None


def survey_of(package: str, root: Path, asked: list[tuple[str, str]]) -> tuple[str, list[str]]:
    """The task, and each question's answer (dropping a question whose symbol this
    version of the package does not define)."""
    kept = [(q, f) for q, s in asked if (f := defining_file(root, s))]
    task = ASK + "\n".join(f"{n}. {q}" for n, (q, _) in enumerate(kept, 1))
    return task, [f for _, f in kept]


def score(answer: str, expected: list[str], package: str = "") -> int:
    """Right answers: the first file path in item n of the numbered reply is the file of
    question n, written as its path in the package (`retry.py`, `asyncio/retry.py`),
    with the package's folder or not, or as an absolute path ending in the package's
    folder and that path (the workspace's own, `/tmp/…/click/core.py`). An item runs
    to the next one, so an answer under its question's line counts. Only the first path
    counts, so a reply that lists every file on every line scores nothing for it."""
    text = _without_opening(answer)
    starts = list(re.finditer(r"^\W*(\d{1,2})[.):]\s*", text, re.M))
    items: dict[int, str] = {}
    for match, after in zip(starts, [*starts[1:], None], strict=False):
        items.setdefault(int(match.group(1)), text[match.end() : after.start() if after else None])
    right = 0
    for number, path in enumerate(expected, 1):
        found = _PATH.search(items.get(number, ""))
        named = found.group(0).removeprefix("./") if found else ""
        absolute = bool(package) and named.startswith("/") and named.endswith(f"/{package}/{path}")
        right += named in (path, f"{package}/{path}") or absolute
    return right


_PATH = re.compile(r"[\w./-]*\w\.py\b")


def _checked(answer: str) -> str:
    """The answer without the lines gaffer says no worker's answer had."""
    kept, unchecked = [], False
    for line in answer.splitlines():
        unchecked = line.startswith(UNCHECKED) or (unchecked and line.strip() != "")
        kept += [] if unchecked else [line]
    return "\n".join(kept)


def _without_opening(answer: str) -> str:
    """The answer without the opening gaffer gives a small model's answer with tools
    off ("From what I found:"), which would hide an item on its line."""
    return answer.removeprefix(server.ANSWER_OPENING.rstrip()).lstrip()


def copy_package(package: str, into: Path) -> Path:
    source = Path(__import__(package).__file__ or "").parent
    root = into / package
    shutil.copytree(source, root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def run_gaffer(
    workspace: Path, logs: Path, args: list[str], task: str, seconds: int, endpoint: list[str]
) -> tuple[list[dict[str, Any]], float, str]:
    env = {**os.environ, "GAFFER_LOG_DIR": str(logs)}
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-P",  # the workspace is no path to import from (tenacity's own asyncio/)
            "-m",
            "supervisor",
            "run",
            *endpoint,
            "--quiet",
            "--output-format",
            "json",
            *args,
            "--max-seconds",
            str(seconds),
            task,
        ],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=seconds + 180,
    )
    wall = time.monotonic() - started
    answer = ""
    with contextlib.suppress(json.JSONDecodeError, AttributeError):
        answer = str(json.loads(done.stdout).get("answer") or "")
    records = [
        json.loads(line)
        for log in sorted(logs.glob("*.jsonl"))
        for line in log.read_text().splitlines()
        if line.strip()
    ]
    return records, wall, answer


def measured(records: list[dict[str, Any]], wall: float, right: int, of: int) -> Outcome:
    end = next((r for r in reversed(records) if r.get("event") == "session_end"), {})
    starts = {r["agent_id"]: r["ts"] for r in records if r.get("event") == "agent_start"}
    spans = [
        (starts[r["agent_id"]], r["ts"])
        for r in records
        if r.get("event") == "agent_end" and r.get("parent_id") and r["agent_id"] in starts
    ]
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return Outcome(
        right=right,
        of=of,
        wall=wall,
        tokens=int(end.get("tokens") or 0),
        workers=sum(r.get("event") == "delegate_start" for r in records),
        most_at_once=most,
        conflicts=sum(r.get("event") == "merge" and r.get("status") == "conflict" for r in records),
        status=str(end.get("status") or "no log"),
        cached=sum(
            int(r.get("cached_tokens") or 0) for r in records if r.get("event") == "llm_call"
        ),
        unsupported=sum(
            r.get("event") == "verification" and r.get("verdict") == "unsupported" for r in records
        )
        + sum(
            str(r.get("answer") or "").count(UNSUPPORTED)
            for r in records
            if r.get("event") == "agent_end"
        ),
    )


def keep(name: str, logs: Path, answer: str) -> None:
    KEPT.mkdir(parents=True, exist_ok=True)
    for log in logs.glob("*.jsonl"):
        shutil.copy(log, KEPT / f"{name}.jsonl")
    (KEPT / f"{name}.answer.txt").write_text(answer)


def surveyed() -> list[str]:
    """The packages surveyed: those BENCH_PACKAGES names (comma-separated, the held-out
    ones among them), else the four of SURVEYS."""
    chosen = [p for p in os.environ.get("BENCH_PACKAGES", "").split(",") if p]
    every = [package for package, _ in SURVEYS + HELD_OUT]
    return [package for package in every if package in chosen] if chosen else every[: len(SURVEYS)]


def survey(
    endpoint: list[str], one_call: Callable[[str], tuple[str, int]]
) -> dict[str, list[Outcome]]:
    ways: dict[str, list[Outcome]] = {"default top agent": [], "one explorer": [], "one call": []}
    for package, asked in [(p, a) for p, a in SURVEYS + HELD_OUT if p in surveyed()]:
        with tempfile.TemporaryDirectory() as tmp:
            root = copy_package(package, Path(tmp))
            task, expected = survey_of(package, root, asked)
            for way, args in (
                ("default top agent", []),
                ("one explorer", ["--profile", "explorer"]),
            ):
                logs = Path(tmp) / f"logs-{len(ways[way])}-{args[-1] if args else 'top'}"
                records, wall, answer = run_gaffer(
                    root, logs, ["--read-only", *args], task, SURVEY_SECONDS, endpoint
                )
                keep(f"{package}.{args[-1] if args else 'top'}", logs, answer)
                right = score(answer, expected, package)
                ways[way].append(measured(records, wall, right, len(expected)))
                ways[way][-1].unchecked = right - score(_checked(answer), expected, package)
                print(f"{package} {way}: {ways[way][-1]}", file=sys.stderr)
            started = time.monotonic()
            with tempfile.TemporaryDirectory() as state:  # the map's cache is the bench's own
                os.environ["XDG_STATE_HOME"], before = state, os.environ.get("XDG_STATE_HOME")
                try:
                    shown = rendered(build(root), task, map_chars(server.CONTEXT_PER_SLOT))
                finally:
                    os.environ.pop("XDG_STATE_HOME")
                    if before is not None:
                        os.environ["XDG_STATE_HOME"] = before
            answer, tokens = one_call(f"# The workspace's code\n\n{shown}\n\n{task}")
            keep(f"{package}.one-call", Path(tmp) / "none", answer)
            ways["one call"].append(
                Outcome(
                    score(answer, expected, package),
                    len(expected),
                    time.monotonic() - started,
                    tokens,
                )
            )
            print(f"{package} one call: {ways['one call'][-1]}", file=sys.stderr)
    return ways


def passing_tests(workspace: Path) -> tuple[int, int]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=300,
    )
    passed = sum(int(n) for n in re.findall(r"(\d+) passed", done.stdout))
    failed = sum(int(n) for n in re.findall(r"(\d+) (?:failed|error)", done.stdout))
    return passed, passed + failed


def refactor(endpoint: list[str]) -> dict[str, Outcome]:
    ways: dict[str, Outcome] = {}
    for way, args in (("isolated coders", ["--isolate"]), ("one coder", ["--profile", "coder"])):
        with tempfile.TemporaryDirectory() as tmp:
            workspace = Path(tmp) / "project"
            total = write_project(workspace)
            if os.geteuid() == 0:  # a coder's container runs as the owner, never root
                for path in [workspace, *workspace.rglob("*")]:
                    os.chown(path, USER_UID, USER_UID, follow_symlinks=False)
            logs = Path(tmp) / "logs"
            records, wall, answer = run_gaffer(
                workspace, logs, ["--yes", *args], REFACTOR_TASK, REFACTOR_SECONDS, endpoint
            )
            keep(f"refactor.{args[-1].strip('-')}", logs, answer)
            write_tests(workspace)  # as they were: a coder that changed them gains nothing
            passed, _ = passing_tests(workspace)
            ways[way] = measured(records, wall, passed, total)
            print(f"refactor {way}: {ways[way]}", file=sys.stderr)
    return ways


def print_tables(surveys: dict[str, list[Outcome]], refactors: dict[str, Outcome]) -> None:
    if surveys:
        names = surveyed()
        print("\nSurvey: right answers per codebase, then totals")
        print(
            f"{'way':<20}"
            + "".join(f"{n:>10}" for n in names)
            + f"{'right':>8}{'wall s':>9}{'tokens':>9}{'cached':>9}{'workers':>9}{'at once':>9}"
            + f"{'unsupported':>12}{'unchecked':>10}"
        )
        for way, runs in surveys.items():
            cells = "".join(f"{f'{o.right}/{o.of}':>10}" for o in runs)
            share = sum(o.right for o in runs) / max(1, sum(o.of for o in runs))
            print(
                f"{way:<20}{cells}{share:>8.0%}{sum(o.wall for o in runs):>9.0f}"
                f"{sum(o.tokens for o in runs):>9}{sum(o.cached for o in runs):>9}"
                f"{sum(o.workers for o in runs):>9}{max(o.most_at_once for o in runs):>9}"
                f"{sum(o.unsupported for o in runs):>12}{sum(o.unchecked for o in runs):>10}"
            )
    if refactors:
        print("\nRefactor: tests passing afterwards (11 of the 13 pass before any change)")
        print(
            f"{'way':<20}{'tests':>8}{'wall s':>9}{'tokens':>9}{'workers':>9}{'conflicts':>10}  status"
        )
        for way, o in refactors.items():
            print(
                f"{way:<20}{f'{o.right}/{o.of}':>8}{o.wall:>9.0f}{o.tokens:>9}{o.workers:>9}"
                f"{o.conflicts:>10}  {o.status}"
            )
    print(f"\nlogs and answers: {KEPT}")


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.delegation",
        description="Delegating against one agent, on code nobody here wrote.",
    )
    parser.add_argument("--base-url", help="another endpoint (default: the bundled local model)")
    parser.add_argument("--model", help="the model at --base-url")
    parser.add_argument("--only", choices=("survey", "refactor"), help="one half of the bench")
    chosen = parser.parse_args(args)
    base_url, model_name, only = chosen.base_url, chosen.model, chosen.only
    left_running = True
    try:
        if only != "survey":
            docker.check_image(docker.client(), "gaffer-sandbox:latest")
        if base_url is None:
            server.check_machine()
            store.pull()
            left_running = server.running() is not None
            if not left_running:  # one server, found by each `gaffer run --local`
                server.start(detach=True)
            found = server.running()
            assert found is not None
            base_url, model_name, endpoint = found.base_url, found.model, ["--local"]
        else:
            endpoint = ["--base-url", base_url, *(["--model", model_name] if model_name else [])]
    except (SandboxUnavailable, server.LocalUnavailable, store.PullError) as error:
        print(f"bench-delegation: cannot run here: {error}", file=sys.stderr)
        return 1
    model = OpenAIModel(
        model=model_name or "gpt-4o-mini",
        base_url=base_url,
        api_key=None if "--local" in endpoint else os.environ.get("OPENAI_API_KEY"),
        max_output_tokens=600,
        temperature=0.0,
    )

    def one_call(prompt: str) -> tuple[str, int]:
        turn = model.complete([{"role": "user", "content": prompt}], [])
        return turn.text, turn.usage.total

    try:
        surveys = survey(endpoint, one_call) if only != "refactor" else {}
        refactors = refactor(endpoint) if only != "survey" else {}
    finally:
        if not left_running:
            server.stop_running()
    print_tables(surveys, refactors)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
