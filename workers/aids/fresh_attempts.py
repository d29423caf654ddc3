"""Fresh attempts: when a small model is stuck on its own failing code, gaffer asks for the
change again from the files as they were, and keeps only what passes the tests.

A 1.5B coder whose fix failed the tests writes the same code back again and again, even
when asked once more with its code and the failure in front of it (the focused ask).
Asked afresh, from the task and the files as they were before it began, at temperature
1.0, it writes other programs, and some pass (`intervals`: 9 of 16 samples). So when the
agent is stuck (it stops, or goes round) and the tests still fail, gaffer draws up to
MAX_FRESH_ATTEMPTS samples, once a run, before any focused ask, each written as the
agent's blocks are (read-before-edit, protected paths; its blocks for tests left out)
and judged by the task's test command in the agent's sandbox. One that passes is kept;
one that fails is taken back, every file as the agent left it. Two failed samples may be
joined (workers/aids/joins.py). Keeping the sample that passes the tests is how AlphaCode
turns weak tries into solutions.

Every sample is a logged `llm_call` (`aside`, with its `temperature`, `max_tokens` and
`stop`: workers/aids/fresh_ask.py), every write and test run a logged `tool_call`, and
each attempt a `fresh_attempt` line. A sample taken back leaves the agent's evidence as
it was: the gate judges what is in the workspace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from workers.aids.file_blocks import MAX_BLOCK_FILE_BYTES, read_blocks, write
from workers.aids.focused_write import fenced, prose
from workers.aids.fresh_ask import Ask, prompt
from workers.aids.joins import FailedSample, Joins
from workers.aids.tests_after_writes import run_test
from workers.changes.change_sets import Change
from workers.changes.snapshots import Tree
from workers.changes.undo import CannotUndo
from workers.facts import Facts
from workers.guards.test_runs import (
    failed_tests,
    is_test_run,
    ran_no_tests,
)
from workers.guards.verification import evidence, judge, outcome
from workers.hooks import Aid, Finish, View
from workers.log.schema import FreshAttempt
from workers.model import AssistantTurn, ModelError
from workers.tools.base import ToolError
from workers.tools.workspace import read_confined

# Each costs a call with a prompt of its own (no cache) and a test run, about 15 s on two
# cores: six give a sample that passes one time in five a three-in-four chance.
MAX_FRESH_ATTEMPTS = 6
# The model's own distribution, unsharpened: near-greedy sampling gives the same wrong
# program again (`intervals`: 1 of 8 samples passed at 0.8, 9 of 16 at 1.0). llama.cpp's
# default top-k, top-p and min-p still cut the tail that would stop the code parsing; 1.0
# is also OpenAI's default.
FRESH_TEMPERATURE = 1.0
KEPT = (
    "Your code still failed the tests, so gaffer asked for the change afresh, from the "
    "files as they were before you began. This was written:\n\n{written}\n\nThe tests "
    "pass now (`{command}`):\n\n{output}\n\nTools are off and the files stay as they "
    "are. In plain sentences, with no code, give your final answer: what was changed and "
    "how it was checked."
)
AS_IT_IS = (
    "gaffer ran the test command your task names, `{command}`: the tests pass with your code "
    "as it is.\n\n{output}\n\nTools are off and the files stay as they are. In plain "
    "sentences, with no code, give your final answer: what was changed and how it was checked."
)
AS_IT_IS_FAILING = (
    "gaffer ran the test command your task names, `{command}`, on your code as it is:\n\n{output}"
)


@dataclass(frozen=True)
class Kept:
    """The tests pass: with a sample that stays, or (attempt 0) with the agent's own code
    under the test command its task names."""

    attempt: int
    written: str
    command: str
    made_from: tuple[int, int] | None = None
    """A join: the samples it was made from."""

    @property
    def account(self) -> str:
        """What happened, in gaffer's words: the answer when the model gives none."""
        if not self.attempt:
            return f"The tests pass with the code as it is (`{self.command}`, run by gaffer)."
        kept = f"kept sample {self.attempt}"
        if self.made_from:
            kept = f"joined samples {self.made_from[0]} and {self.made_from[1]}"
        return (
            f"gaffer asked for the change afresh and {kept}, which passes the tests "
            f"(`{self.command}`):\n\n{self.written}"
        )


class FreshAttempts(Aid):
    """For an agent that writes in blocks, can run the tests and is stuck on a failing
    test run (it stops, or goes round): samples of the change, once a run,
    each kept only when the tests pass. The run then finishes with the model's account
    of it, asked with tools off and its code blocks not written (a small model writes its
    own failing code back), or gaffer's account when the model gives none."""

    def __init__(self) -> None:
        self.drawn = 0
        """Samples drawn this run."""

    def before_first_step(self, view: View) -> None:
        self.drawn = 0

    def when_stuck(self, view: View, said: str) -> Finish | None:
        kept = self._kept(view)
        if kept is None:
            return None
        answer = view.answer_with_tools_off("tools are off: the tests pass and the run ends")
        return Finish(prose(answer) or kept.account)

    def _kept(self, view: View) -> Kept | None:
        command = _failing_test(view)
        if command is None or self.drawn:
            return None
        if command != _last_test_run(view) and _passes_as_it_is(view, command):
            return Kept(0, "", command)  # the agent had run the wrong command; it has been told
        asked = prompt(view)
        if asked is None:
            return None
        try:
            return self._samples(view, command, asked)
        except CannotUndo:
            return None  # the files cannot be put back as they were: no sample can be tried
        except CannotTakeBack as error:
            view.tell(str(error), source="fresh_attempt")
            return None

    def _samples(self, view: View, command: str, ask: Ask) -> Kept | None:
        """Samples drawn and tried, and joins of those that failed, until one passes."""
        drawn: set[str] = set()
        joins = Joins()
        for attempt in range(1, MAX_FRESH_ATTEMPTS + 1):
            if view.spent():
                return None
            self.drawn = attempt
            try:
                turn = view.ask_aside(
                    ask.text, temperature=FRESH_TEMPERATURE, max_tokens=ask.cap, stop=ask.stop
                )
            except ModelError:
                return None  # the agent goes on as it was; the call is in the log
            sample = Sample(view, attempt, command)
            if turn.text.strip() in drawn:
                sample.logged(False, "the same sample as an earlier one")
                continue
            drawn.add(turn.text.strip())
            if (written := sample.tried(turn, ask.may_write)) is not None:
                return Kept(attempt, written, command)
            if sample.failed is None:
                continue
            for number, made_from, taken, files in joins.after(sample.failed):
                if view.spent():
                    return None
                joined = Sample(view, attempt, command, made_from, join=number)
                reply = "\n\n".join(f"{path}\n{fenced(text, path)}" for path, text in files.items())
                if (
                    written := joined.tried(AssistantTurn(text=reply), ask.may_write, taken)
                ) is not None:
                    return Kept(attempt, written, command, made_from)
        return None


def _failing_test(view: View) -> str | None:
    """The test command to judge samples by, when the agent is stuck on a failing test
    run (its last, failed after its last change): the one its task names, else the one
    that failed, if it ran any test. None when that is not where it stands."""
    if view.files_seen() is None or not view.tracks_changes or not view.last_failure:
        return None
    runners = view.test_runners
    verdict = judge(view.facts, runners)
    if verdict is None or verdict.verified or verdict.untested:
        return None
    if named := view.check_command:
        return named
    if ran_no_tests(view.last_failure):
        return None  # `pytest calc.py`: a sample could never pass it
    return _last_test_run(view)


def _last_test_run(view: View) -> str | None:
    runners = view.test_runners
    runs = [f for f in evidence(view.facts) if f.command and is_test_run(f.command, runners)]
    last = runs[-1] if runs else None
    if last is None or last.denied or (last.exit_code in (0, None) and not last.timed_out):
        return None  # passed, or never ran; one that hung failed like any other
    return last.command


def _passes_as_it_is(view: View, command: str) -> bool:
    """Whether the task's own test command passes on the agent's code as it is (the
    agent ran another: `pytest calc.py` runs no test); the agent is told either way."""
    run = run_test(view, command, f"fresh0-{view.step}-test")
    passed = _passed(run.facts)
    said = AS_IT_IS if passed else AS_IT_IS_FAILING
    view.tell(said.format(command=command, output=_tail(run.output)), source="fresh_attempt")
    return passed


class CannotTakeBack(Exception):
    """A sample could not be taken back: what the agent is told, naming the files."""


class Sample:
    """One sample of the change, tried on the files as they were and kept or taken back."""

    def __init__(
        self,
        view: View,
        attempt: int,
        command: str,
        made_from: tuple[int, int] | None = None,
        join: int = 0,
    ) -> None:
        files = view.files_seen()
        assert files is not None and view.tracks_changes
        self.view, self.seen = view, files
        self.attempt, self.command, self.made_from = attempt, command, made_from
        # its calls' ids: fresh2-5-1, fresh2-5-test; the second join's: join2-5-1
        self.label = f"join{join}" if made_from else f"fresh{attempt}"
        self.files: list[str] = []
        self.failed: FailedSample | None = None
        """When the tests failed with it: what it wrote, for joins."""

    def logged(self, kept: bool, reason: str, run: Facts | None = None) -> None:
        self.view.emit(
            FreshAttempt(
                attempt=self.attempt,
                temperature=FRESH_TEMPERATURE,
                files=self.files,
                command=self.command if run else None,
                exit_code=run.exit_code if run else None,
                kept=kept,
                reason=reason,
                made_from=list(self.made_from) if self.made_from else None,
            )
        )

    def tried(self, turn: AssistantTurn, may_write: frozenset[str], taken: str = "") -> str | None:
        """What the sample wrote when the tests pass with it (it stays), else None (the
        workspace is as the agent left it). Raises CannotTakeBack when it is not. A
        join says which definition it took from its donor (`taken`)."""
        said = ""
        if self.made_from:
            said = f"sample {self.made_from[0]} with {taken} from sample {self.made_from[1]}: "
        view = self.view
        found = read_blocks(turn.text, self.seen, "")
        paths = [json.loads(c.arguments)["path"] for c in found.calls]
        if not paths:
            why = "the code as it is now" if found.unchanged else "no file block"
            cut = f", cut off at {turn.usage.completion_tokens} tokens" if turn.cut_off else ""
            self.logged(False, f"the sample is {why}{cut}")
            return None
        refused = sorted(set(paths) - may_write)
        if len(refused) == len(set(paths)):
            self.logged(
                False, f"the sample writes {', '.join(refused)}: not a file it was shown, or a test"
            )
            return None
        if refused:  # a test copied out after the code: the code is still tried
            said += f"its blocks for {', '.join(refused)} left out (not a file it may write); "
        before = view.mark()  # gaffer writes for the agent from here
        checkpoint = view.checkpoint()
        try:
            written, ran = self._written_and_tested(turn, view.since_start(), may_write)
        except CannotUndo as error:
            self._take_back(before, "the files could not be put back as they were")
            self.logged(False, f"the files could not be put back as they were: {error}")
            raise
        except BaseException:
            self._take_back(before, "interrupted")  # a fault or Ctrl-C leaves the agent's work
            raise
        if written is not None and ran is not None and _passed(ran):
            self.logged(True, f"{said}the tests pass", ran)
            return written
        why = "the sample changed nothing" if ran is None else f"the tests failed ({outcome(ran)})"
        self._take_back(before, why, ran)
        view.restore(checkpoint)  # the workspace is as the agent's evidence says
        self.logged(False, f"{said}{why}; taken back", ran)
        return None

    def _written_and_tested(
        self, turn: AssistantTurn, agents_changes: list[Change], may_write: frozenset[str]
    ) -> tuple[str | None, Facts | None]:
        """The files put back as they were, the sample's blocks for the files it may
        write written over them, and the failing test command run again: what was written
        and how the run went (None, None when the sample changes nothing there)."""
        view = self.view
        if agents_changes:
            view.undo(agents_changes)
        for change in agents_changes:  # the model saw these as they are now
            view.saw(change.path)
        view.look()
        facts_before = len(view.facts)
        # samples answer to no repetition guard: gaffer's retries are not the agent's
        blocks = read_blocks(turn.text, self.seen, f"{self.label}-{view.step}", cut=turn.cut_off)
        blocks.calls = [c for c in blocks.calls if json.loads(c.arguments)["path"] in may_write]
        written = write(view, blocks, checked=False)
        self.files = sorted({p for f in view.facts[facts_before:] for p in f.modified})
        if not self.files or not written:
            return None, None
        run = run_test(view, self.command, f"{self.label}-{view.step}-test")
        if _passed(run.facts):
            view.tell(
                KEPT.format(written=written, command=self.command, output=_tail(run.output)),
                source="fresh_attempt",
            )
        elif run.facts.exit_code not in (0, None) and not run.facts.denied:
            self.failed = self._as_written(view.full_output(run))
        return written, run.facts

    def _as_written(self, output: str) -> FailedSample | None:
        """The sample's files as it wrote them and the tests it failed; None when a file
        cannot be read back (gone, a link, too large)."""
        files = {}
        for path in self.files:
            try:
                data = read_confined(self.seen.workspace, path, MAX_BLOCK_FILE_BYTES)
            except (OSError, ToolError):
                return None
            if data is None or len(data) > MAX_BLOCK_FILE_BYTES:
                return None
            try:
                files[path] = data.decode()
            except UnicodeDecodeError:
                return None
        return FailedSample(self.attempt, files, failed_tests(output))

    def _take_back(self, before: Tree, why: str, ran: Facts | None = None) -> None:
        """Every file as the agent left it; CannotTakeBack (logged) when that fails."""
        view = self.view
        touched = view.changed_since(before)
        if not touched:
            return
        try:
            view.undo(touched)
        except CannotUndo as error:
            view.look()
            self.logged(False, f"{why}; it could not be taken back: {error}", ran)
            raise CannotTakeBack(
                f"gaffer tried a fresh sample of the change and could not take it back "
                f"({error}). These files may hold it now: "
                + ", ".join(sorted({c.path for c in touched}))
            ) from error
        view.look()
        for change in touched:  # the agent knows these files: they are its own again
            view.saw(change.path)


def _passed(run: Facts) -> bool:
    """The test run ran, exited 0 and ran tests."""
    return run.exit_code == 0 and not run.no_tests and not run.denied


def _tail(output: str, limit: int = 600) -> str:
    return output if len(output) <= limit else "…" + output[-limit:]
