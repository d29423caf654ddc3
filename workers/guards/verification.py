"""The verification gate: no "done" without evidence the harness saw for itself.

Evidence is what the harness recorded (the files each call really changed, seen in
snapshots of the workspace; commands and their exit codes), never what the model says.
A test run is a command whose exit status is a test runner's (workers/guards/test_runs.py); it
counts only when it exited 0 after the last change having run at least one test. A
denied or refused command counts as not run. Workers' evidence reaches their caller
inside the delegate call's facts, in order.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from workers.facts import Facts
from workers.guards.test_runs import is_test_run
from workers.log.events import Emitter
from workers.log.schema import Verification

# How often an agent is sent back before its answer goes out marked unverified.
DEFAULT_MAX_SEND_BACKS = 2


@dataclass(frozen=True)
class Verdict:
    verified: bool
    reason: str = ""
    untested: bool = False
    """Files changed and no test ran after: what is missing is a test run, not a fix."""

    @property
    def failed(self) -> bool:
        """The change's own checks ran and failed."""
        return not self.verified and not self.untested

    @property
    def line(self) -> str:
        return (
            "Verification: verified"
            if self.verified
            else f"Verification: unverified ({self.reason})"
        )


def evidence(facts: Iterable[Facts]) -> Iterator[Facts]:
    """Every tool call's facts in order, a worker's own calls in place of its delegate call."""
    for fact in facts:
        if fact.worker is not None:
            yield from evidence(fact.evidence)
        else:
            yield fact


def judge(facts: Iterable[Facts], test_runners: Iterable[str] = ()) -> Verdict | None:
    """None when nothing was changed; otherwise whether the change was shown to work."""
    events = list(evidence(facts))
    if tampered := list(dict.fromkeys(p for e in events for p in e.tests_changed)):
        return Verdict(
            False, "the task's tests were changed and not put back: " + ", ".join(tampered)
        )
    # What a test run writes itself (snapshots of expected output, reports) is not a
    # change that needs another test run after it; tests gaffer put back after a command
    # are (its own test run ran against the changed tests).
    edits = [
        i
        for i, e in enumerate(events)
        # A note to the project memory (`remember`) is not a code change either.
        if (
            e.modified
            and not e.memory
            and not (e.command is not None and is_test_run(e.command, test_runners))
        )
        or e.tests_put_back
    ]
    if not edits:
        return None
    after = events[edits[-1] + 1 :]
    ran = [e for e in after if e.command is not None and not e.denied]
    runs = [e for e in ran if is_test_run(str(e.command), test_runners)]
    tests = [e for e in runs if e.steered is None]
    if not tests:
        if runs:  # only runs that cannot stand for the tests the task keeps
            why = f"`{runs[-1].command}` cannot verify the tests the task keeps: {runs[-1].steered}"
            return Verdict(False, why, untested=True)
        return Verdict(
            False, "files were changed and no test ran after the last edit", untested=True
        )
    last = tests[-1]
    if last.exit_code != 0:
        return Verdict(False, f"the last test run failed: `{last.command}` → {outcome(last)}")
    if last.no_tests:
        return Verdict(False, f"the last test run ran no tests: `{last.command}`", untested=True)
    unexplained = _still_failing([e for e in ran if e not in runs])
    if unexplained:
        return Verdict(False, "commands failed after the last edit: " + "; ".join(unexplained))
    return Verdict(True)


def _still_failing(commands: list[Facts]) -> list[str]:
    """Commands whose latest run failed (a later success of the same command clears it)."""
    latest: dict[str, Facts] = {}
    for command in commands:
        latest[str(command.command)] = command
    return [f"`{c}` → {outcome(e)}" for c, e in latest.items() if e.exit_code != 0]


def outcome(event: Facts) -> str:
    """How a command ended, in the words reports and the task state use."""
    if event.denied:
        return "denied, not run"
    if event.timed_out:
        return "timed out"
    return "killed" if event.exit_code is None else f"exit {event.exit_code}"


def files_changed(facts: Iterable[Facts]) -> list[str]:
    """Every path an agent or its workers wrote, in the order first written."""
    files: dict[str, None] = {}
    for event in evidence(facts):
        files.update((path, None) for path in event.modified)
    return list(files)


# A path as answers name them: `src/app.py`, `workers/loop.py:42`, `sandbox_image/`.
_NAMED_PATH = re.compile(
    r"(?<![\w/.:-])((?:[\w.-]+/)+(?:[\w.-]+\.(?:py|md|toml|json|ya?ml|txt|sh|js|ts|tsx|go|rs|c|h|cpp|java|rb|cfg|ini|jinja))?|[\w-]+\.(?:py|md|toml|json|ya?ml|txt|sh|js|ts|go|rs|cfg|ini))(?::\d+)?(?![\w/])"
)


# A bare file name ("loop.py") counts when a file of that name is anywhere in the
# workspace; looking is capped so a huge tree costs little.
MAX_NAMES_SEEN = 50_000
_SKIPPED_WHEN_LOOKING = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__"})


def named_paths(text: str, container_root: str | None = None) -> list[str]:
    """The paths a text names, workspace-relative, in order, each once: `src/app.py`,
    `workers/loop.py:42` (as `workers/loop.py`), `/workspace/calc.py` (as `calc.py`)."""
    if container_root:
        text = re.sub(rf"(?<![\w/.-]){re.escape(container_root.rstrip('/'))}/", " ", text)
    paths: dict[str, None] = {}
    for match in _NAMED_PATH.finditer(text):
        if "://" in text[max(0, match.start() - 8) : match.start() + 3]:
            continue  # part of a URL
        paths[match.group(1)] = None
    return list(paths)


_CODE_NAME = re.compile(r"`[^`\n]{2,}`|\b[A-Za-z_]\w*\(\)|\b\w+/")


def names_code(answer: str, workspace: Path | None) -> bool:
    """Whether an answer speaks of the code: a path, a `name` or call(), a folder/, or a
    top-level name of the workspace. Only such an answer needs a look behind it; a
    greeting or a question about no code is answered as it is."""
    if named_paths(answer) or _CODE_NAME.search(answer):
        return True
    if workspace is None:
        return False
    try:
        top = {
            entry.name.lower() for entry in os.scandir(workspace) if not entry.name.startswith(".")
        }
    except OSError:
        return False
    return any(word in top for word in re.findall(r"[\w.-]+", answer.lower()))


# Words of a task about the code in front of the agent, when it names none of it.
_CODE_WORDS = frozenset(
    [
        "repo",
        "repository",
        "codebase",
        "project",
        "code",
        "source",
        "file",
        "files",
        "folder",
        "folders",
        "directory",
        "function",
        "functions",
        "class",
        "classes",
        "method",
        "methods",
        "module",
        "modules",
        "package",
        "test",
        "tests",
        "bug",
        "bugs",
        "fix",
        "error",
        "errors",
        "crash",
        "fails",
        "failing",
        "refactor",
        "rename",
        "implement",
        "add",
        "change",
        "build",
        "survey",
        "explain",
        "where",
        "api",
        "cli",
        "config",
        "docs",
        "readme",
        "script",
    ]
)


def about_the_code(task: str, workspace: Path | None) -> bool:
    """Whether a task is about the code: it names some, or speaks of code, files,
    tests, a change. `hello there` or `what is 2+2?` is not: it needs no look."""
    words = set(re.findall(r"[a-z]+", task.lower()))
    return bool(words & _CODE_WORDS) or names_code(task, workspace)


def missing_paths(answer: str, workspace: Path, container_root: str | None = None) -> list[str]:
    """Paths an answer names that are not in the workspace: what a model made up."""
    missing: list[str] = []
    inside: set[str] | None = None
    for path in named_paths(answer, container_root):
        if os.path.lexists(os.path.join(workspace, path)):
            continue
        # A name, or a path from inside a folder ("workers/: cluster/driver.py, …"),
        # counts when some file or folder in the workspace ends with it.
        inside = _paths_in(workspace) if inside is None else inside
        if path.rstrip("/") in inside:
            continue
        missing.append(path)
    return missing


def _paths_in(workspace: Path) -> set[str]:
    """Every tail of every workspace path: `a/b/c.py` gives `c.py`, `b/c.py`, `a/b/c.py`."""
    tails: set[str] = set()
    for folder, dirs, files in os.walk(workspace):
        dirs[:] = [d for d in dirs if d not in _SKIPPED_WHEN_LOOKING]
        parts = Path(folder).relative_to(workspace).parts
        for name in [*dirs, *files]:
            whole = [*parts, name]
            tails.update("/".join(whole[i:]) for i in range(len(whole)))
        if len(tails) > MAX_NAMES_SEEN:
            break
    return tails


NO_CHANGE = (
    "Before you answer: you have changed no files. If the task asks for a change, make it "
    "now and run the tests; if no change is needed, say why in your answer."
)


EMPTY_ANSWER = (
    "Your reply was empty. Write your final answer now, in plain sentences: what you "
    "found, with the files that show it."
)


@dataclass
class Gate:
    """Checks an agent's final answer; sends it back with a reason at most `max_send_backs` times.

    An empty answer is no answer. An answer after edits needs a passing test run after
    the last edit. An answer with no edits needs evidence: a worker that can read the code must have looked before it
    answers, and no answer may name a file that is not there.
    """

    events: Emitter
    max_send_backs: int = DEFAULT_MAX_SEND_BACKS
    test_runners: tuple[str, ...] = ()
    """Test runners besides the known ones (workers/guards/test_runs.py)."""
    workspace: Path | None = None
    """Where the paths an answer names are looked up; None skips that check."""
    container_root: str | None = None
    must_look: bool = False
    """The agent was given a task and tools to read the code: no answer without using them."""
    look_with: str = "the tools (list_dir, find_files, grep, read_file)"
    """What it looks with, named when it is sent back to look."""
    through_workers: bool = False
    """It looks through its workers (it reads nothing itself)."""
    expects_change: bool = False
    """The agent was given a task and tools to change files: an answer that changed none
    goes back once, asking for the change or for why none is needed."""
    sent_back: int = field(default=0, init=False)
    wants_call: bool = field(default=False, init=False)
    """The last send-back asked for a tool call (a test run, a look at the code): the
    agent's next reply must be one, or a small model repeats its answer word for word."""
    _asked_for_change: bool = field(default=False, init=False)

    def review(
        self, facts: list[Facts], answer: str = "", looked: bool | None = None
    ) -> str | None:
        """A message sending the agent back to work, or None to let the answer through."""
        self.wants_call = False
        if not answer.strip() and self.sent_back < self.max_send_backs:
            # Nothing said is no answer, whatever the evidence holds.
            self._sent_back_unsupported("the answer was empty")
            return EMPTY_ANSWER
        verdict = judge(facts, self.test_runners)
        if (
            verdict is None
            and self.expects_change
            and not self._asked_for_change
            and self.sent_back < self.max_send_backs
        ):
            self._asked_for_change = True
            self._sent_back_unsupported("no files changed")
            return NO_CHANGE
        if (
            verdict is None
            and self.sent_back < self.max_send_backs
            and (problem := self._unsupported(bool(facts) if looked is None else looked, answer))
        ):
            self._sent_back_unsupported(problem)
            # An agent that looks through workers mends a wrong name from the reports it
            # has; requiring a call would send a whole new round of workers.
            self.wants_call = not (self.through_workers and looked is not False)
            return (
                f"Before you answer: {problem}. Check with {self.look_with}, then answer "
                "from what they show."
            )
        if verdict is None or verdict.verified or self.sent_back >= self.max_send_backs:
            self.events.emit(
                Verification(
                    verdict="none"
                    if verdict is None
                    else ("verified" if verdict.verified else "unverified"),
                    reason=verdict.reason if verdict else "no files changed",
                    action="accepted",
                    sent_back=self.sent_back,
                    failed=(verdict is not None and verdict.failed) or None,
                )
            )
            return None
        self.sent_back += 1
        self.wants_call = verdict.untested  # a failing test wants a fix, maybe a file block
        self.events.emit(
            Verification(
                verdict="unverified",
                reason=verdict.reason,
                action="sent_back",
                sent_back=self.sent_back,
            )
        )
        return (
            f"Not done yet: {verdict.reason}. Run the project's tests (or the failing command) "
            "and fix what fails, then answer again. If it truly cannot pass, say exactly why in "
            "your answer."
        )

    def _sent_back_unsupported(self, reason: str) -> None:
        self.sent_back += 1
        self.events.emit(
            Verification(
                verdict="unsupported", reason=reason, action="sent_back", sent_back=self.sent_back
            )
        )

    def take_wants_call(self) -> bool:
        """Whether the last send-back asked for a call; asked once, then False."""
        wants, self.wants_call = self.wants_call, False
        return wants

    def _unsupported(self, looked: bool, answer: str) -> str | None:
        if self.must_look and not looked and names_code(answer, self.workspace):
            return "you answered without looking at the code"
        if self.workspace is not None and (
            missing := missing_paths(answer, self.workspace, self.container_root)
        ):
            shown = ", ".join(missing[:5])
            return f"your answer names {shown}, which {'is' if len(missing) == 1 else 'are'} not in the workspace"
        return None

    def stamp(self, answer: str, facts: list[Facts]) -> str:
        verdict = judge(facts, self.test_runners)
        return answer if verdict is None else f"{answer.rstrip()}\n\n{verdict.line}"
