"""What an editing agent is held to: read a file before changing it, and see where a
test failed rather than only that it did.

Both work on the host's view of the workspace, whatever sandbox ran the call: the
container has the workspace mounted, so a path the model names there (`calc.py`,
`/workspace/calc.py`) is the same file here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.guard_hooks import Guard, ModelAsk, PendingCall
from workers.guards.failures import MAX_FOCUS_CHARS, failure_focus, summarised
from workers.guards.task_rules import KeptTests, refusal
from workers.guards.test_runs import is_test_run
from workers.model import MAX_STOP_TEXTS
from workers.tools import outputs
from workers.tools.base import ToolError, ToolResult
from workers.tools.workspace import read_confined, relative, resolve

EDIT_TOOLS = frozenset({"write_file", "edit_file"})
# What a profile's `{editing}` says to an agent that edits with the file tools.
EDIT_WITH_TOOLS = (
    "Prefer edit_file for changes to existing files; copy old_text exactly from read_file."
)
# Enough of a file to recognise it and see where to read on.
HEAD_LINES = 20
# Bigger files are fingerprinted by size and time alone: hashing them on every edit
# would cost more than the check is worth.
MAX_HASHED_BYTES = 20 * 1024 * 1024
TESTS_PASS = (
    "[The tests pass after your last change. If the task is done, reply now with your "
    "final answer: what you changed and how you checked it.]"
)
BACK_TO_FAILING = (
    "not written: the tests pass with {path} as it is now, and this would put it back as it "
    "was when they failed. If the task is done, give your final answer in plain sentences."
)
# A test run's whole output read back for its failures: more is noise.
MAX_FULL_OUTPUT_BYTES = 8 * 1024 * 1024
# A suite seen to run in t seconds is given this many times t before it counts as hung:
# a machine of two cores under load runs it at a third of its speed.
TEST_RUN_MARGIN = 3
# ... and never less than this: starting the interpreter and collecting take a few
# seconds whatever the tests.
TEST_RUN_MIN_S = 10


@dataclass
class EditGuard(Guard):
    """Refuses write_file and edit_file on an existing file until the agent has read it
    since it last changed (by anyone: a formatter, a shell command, another worker), and
    adds to a failed test run where its first failure is."""

    workspace: Path
    container_root: str | None = None
    """Where the workspace is mounted in the agent's sandbox (`/workspace`), if anywhere."""
    seen: dict[str, str] = field(default_factory=dict)
    """Workspace-relative path → the fingerprint of the file when the agent last saw it
    whole: after reading it, or after writing it itself."""
    untested_edit: bool = False
    """It changed a file and has not run the tests since."""
    hint: str = ""
    """How to make a change, added after a failed test's focus."""
    last_failure: str = ""
    """The last test run, when it failed: the command and where it failed."""
    test_runners: tuple[str, ...] = ()
    """Test runners besides the known ones (workers/guards/test_runs.py)."""
    room: int | None = None
    """The most a tool result may hold for the agent's model (`result_chars`); None: no
    limit of the agent's own."""
    written: set[str] = field(default_factory=set)
    """The files it wrote with the file tools (or blocks)."""
    failed_as: dict[str, set[str]] = field(default_factory=dict)
    """Path → the fingerprints the files it wrote had at a failed test run."""
    passing: bool = False
    """The last test run passed, and it has written nothing since."""
    kept: KeptTests | None = None
    """The tests the task's rules keep as they are: writes to them are refused
    (workers/guards/task_rules.py); None: no rule."""
    made_tests: set[str] = field(default_factory=set)
    """Test files the agent made itself, which the task's rules let it (`kept.new_files`)."""
    suite_s: dict[str, float] = field(default_factory=dict)
    """Test command → how long its last run that ended by itself took."""
    hung_at: dict[str, int] = field(default_factory=dict)
    """Test command → the deadline its last run was killed at, having hung."""
    writes_in_blocks: bool = False
    """Its agent writes files as blocks in its replies, tools paused or not: a reply that
    starts a block for a kept test is stopped there (`kept_blocks`). Such a block is
    refused, and a small model writes it whole first (`stagger`: 768 tokens, 142 s)."""

    def before_model(self, ask: ModelAsk) -> None:
        if self.writes_in_blocks and not ask.stop:
            ask.stop = self.kept_blocks()

    def before_call(self, call: PendingCall) -> ToolResult | None:
        if (refused := self.before(call.name, call.arguments)) is not None:
            return refused
        call.arguments = self.fitted(call.name, call.arguments)
        return None

    def after_call(self, call: PendingCall, result: ToolResult) -> ToolResult:
        if call.refused or call.held_back:
            return result
        return self.after(call.name, call.arguments, result, call.took)

    def before(self, name: str, arguments: dict[str, Any] | str) -> ToolResult | None:
        """A refusal to send instead of running the call, or None to run it."""
        if name not in EDIT_TOOLS or not isinstance(arguments, dict):
            return None
        if (kept := self.keeps(arguments.get("path"))) is not None:
            return ToolResult(output=kept, summary="refused: the task keeps it", is_error=True)
        found = self._file(arguments.get("path"))
        if found is None:
            return None  # a new file, or a path the tool itself will refuse
        rel, real = found
        now = _fingerprint(real)
        last = self.seen.get(rel)
        if last == now:
            return self._back_to_failing(name, arguments, rel)
        why = "you have not read it yet" if last is None else "it changed since you last read it"
        return ToolResult(
            output=f"refused: read {rel} before changing it ({why}); nothing was written. "
            f"Call read_file on it, then make the change against what it holds now. It begins:\n"
            + _head(self.workspace, rel),
            summary="refused: read it first",
            is_error=True,
        )

    def deadline(self, command: str) -> int | None:
        """Seconds a run of this test command may take, fitted to its suite: a margin over
        its last run that ended, else the deadline it last hung at; None: nothing known."""
        if (took := self.suite_s.get(command)) is not None:
            return max(TEST_RUN_MIN_S, round(TEST_RUN_MARGIN * took))
        return self.hung_at.get(command)

    def fitted(self, name: str, arguments: dict[str, Any] | str) -> dict[str, Any] | str:
        """A test run given no deadline of its own gets its suite's (not the shell's two
        minutes): one that hangs fails as soon as it is known to."""
        if name != "run_shell" or not isinstance(arguments, dict) or arguments.get("timeout"):
            return arguments
        command = arguments.get("command")
        if not isinstance(command, str) or not is_test_run(command, self.test_runners):
            return arguments
        seconds = self.deadline(command)
        return arguments if seconds is None else {**arguments, "timeout": seconds}

    def _timed(self, arguments: dict[str, Any], result: ToolResult, took: float | None) -> None:
        """How long a test run took to end, or the deadline it hung at."""
        command, facts = str(arguments.get("command")), result.facts
        if facts.timed_out and isinstance(timeout := arguments.get("timeout"), int):
            self.hung_at[command] = timeout
        elif facts.exit_code is not None and not facts.timed_out and took is not None:
            self.suite_s[command] = took
            self.hung_at.pop(command, None)

    def keeps(self, path: object) -> str | None:
        """The refusal for a write to `path` when the task's rules keep it, else None."""
        if self.kept is None or not isinstance(path, str):
            return None
        if self.container_root and (path + "/").startswith(self.container_root + "/"):
            path = path[len(self.container_root) :].lstrip("/") or "."
        try:
            rel = relative(self.workspace, resolve(self.workspace, path))
        except ToolError:
            return None  # the tool itself refuses it
        # A test the agent made where the task lets it make one stays its own to change.
        new = rel in self.made_tests or not (self.workspace / rel).exists()
        if not self.kept.keeps(rel, new=new):
            if new and self.kept.keeps(rel):
                self.made_tests.add(rel)
            return None
        return refusal(self.kept, rel, self.workspace, self.seen)

    def _back_to_failing(self, name: str, arguments: dict[str, Any], rel: str) -> ToolResult | None:
        """A refusal for a write that would put a file back as it was when the tests
        failed, while they pass as it is now: a small model writes its old code again."""
        content = arguments.get("content")
        if name != "write_file" or not self.passing or not isinstance(content, str):
            return None
        digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()
        if digest not in self.failed_as.get(rel, ()):
            return None
        return ToolResult(output=BACK_TO_FAILING.format(path=rel), summary="refused", is_error=True)

    def after(
        self,
        name: str,
        arguments: dict[str, Any] | str,
        result: ToolResult,
        took: float | None = None,
    ) -> ToolResult:
        """Remember a file as the agent now knows it, and how long a test run `took`;
        point a failed test run at its failure."""
        if not isinstance(arguments, dict):
            return result
        if not result.is_error and (name == "read_file" or name in EDIT_TOOLS):
            found = self._file(arguments.get("path"))
            if found is not None:
                self.seen[found[0]] = _fingerprint(found[1])
                if name in EDIT_TOOLS:
                    self.written.add(found[0])
                    self.passing = False
        # What the call really changed (the harness's snapshots), whatever tool made it.
        self.untested_edit |= bool(result.facts.modified) and not result.facts.memory
        command = result.facts.command
        if result.facts.modified and not (
            isinstance(command, str) and is_test_run(command, self.test_runners)
        ):
            self.passing = False  # what passed is not what is there now
        if (
            name == "run_shell"
            and isinstance(command, str)
            and is_test_run(command, self.test_runners)
        ):
            self._timed(arguments, result, took)
            if self.untested_edit and not result.is_error and not result.facts.no_tests:
                # Small models run passing tests again and again; the answer is what's next.
                result = dataclasses.replace(result, output=f"{result.output}\n\n{TESTS_PASS}")
            self.untested_edit = False
            self.last_failure = ""
            self.passing = not result.is_error and not result.facts.no_tests
            if result.is_error:
                self._remember_failing()
        if name == "run_shell" and result.is_error and isinstance(command, str):
            return self._pointed_at(command, result)
        return result

    def _pointed_at(self, command: str, result: ToolResult) -> ToolResult:
        """A failed command's result with where it failed added (a test run's shown as its
        summary when too long); a failed test run is remembered as the last failure."""
        output = self.full_output(result)
        test_run = is_test_run(command, self.test_runners)
        hint = f"\n\n[{self.hint}]" if self.hint else ""

        def focus_on(shown: str) -> str:
            return failure_focus(
                self.workspace,
                command,
                output,
                self.container_root,
                shown=shown,
                test_runners=self.test_runners,
            )

        focus = focus_on(result.output)
        if test_run:  # the room the run has beside where it failed
            room = None if self.room is None else self.room - len(focus) - len(hint) - 2
            if (shorter := summarised(result, output, room)) is not result:
                result, focus = shorter, focus_on(shorter.output)
            self.last_failure = f"$ {command}\n{focus_on('') or output[-MAX_FOCUS_CHARS:]}"
        if focus:
            return dataclasses.replace(result, output=f"{result.output}\n\n{focus}{hint}")
        return result

    def _remember_failing(self) -> None:
        for rel in self.written:
            found = self._file(rel)
            if found is not None:
                self.failed_as.setdefault(rel, set()).add(_fingerprint(found[1]))

    def kept_blocks(self) -> tuple[str, ...]:
        """Where a block for a test the task keeps would begin, for the tests the agent
        has seen (the most a server stops at: four): its path line over a fence. A reply
        that starts one is stopped there, not paid for to be refused."""
        if self.kept is None:
            return ()
        kept = [path for path in sorted(self.seen) if self.kept.keeps(path)]
        return tuple(block_start(path) for path in kept[:MAX_STOP_TEXTS])

    def full_output(self, result: ToolResult) -> str:
        """The whole output when it was cut for the model (saved outside the workspace)."""
        saved = result.facts.output_file
        if isinstance(saved, str) and os.path.isabs(saved):
            where = Path(os.path.dirname(saved))
            if (name := outputs.saved_name(where, saved)) is not None:
                with contextlib.suppress(ToolError):
                    data = outputs.read_saved(where, name, MAX_FULL_OUTPUT_BYTES)
                    return data.decode("utf-8", errors="replace")
        return result.output

    def _file(self, path: object) -> tuple[str, Path] | None:
        if not isinstance(path, str):
            return None
        if self.container_root and (path + "/").startswith(self.container_root + "/"):
            path = path[len(self.container_root) :].lstrip("/") or "."
        try:
            real = resolve(self.workspace, path)
        except ToolError:
            return None
        if not real.is_file():
            return None
        return relative(self.workspace, real), real


def block_start(path: str) -> str:
    """How a reply begins a file block for `path`: its path line over a fence (as a stop
    text, where a block the agent may not write would begin)."""
    return f"{path}\n```"


def _fingerprint(path: Path) -> str:
    info = os.stat(path)
    if info.st_size > MAX_HASHED_BYTES:
        return f"{info.st_size}:{info.st_mtime_ns}"
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _head(workspace: Path, rel: str) -> str:
    try:
        data = read_confined(workspace, rel, 8192) or b""
    except ToolError as error:
        return f"(it cannot be shown: {error})"
    lines = data.decode("utf-8", errors="replace").splitlines()[:HEAD_LINES]
    return "\n".join(f"{n:>4} | {line}" for n, line in enumerate(lines, 1)) or "(empty)"
