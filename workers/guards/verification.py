"""The verification gate: no "done" without evidence the harness saw for itself.

Where the run has a check (workers/check/), an answer after a change stands on gaffer's
own run of it, over the workspace as the agent left it: the verdict is that run's, and
only it says "verified". Where no check can run (no Docker, nothing to run), the gate
falls back to the agent's own evidence, and says so.

Evidence is what the harness recorded (the files each call changed, seen in snapshots;
commands and their exit codes, workers' in their delegate call's facts), never what the
model says. A test run is a command whose exit status is a test runner's
(workers/guards/test_runs.py): it counts when it exited 0 after the last change having
run a test. A denied or refused command counts as not run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from workers import numbered
from workers.check.report import CheckRun, failed_because
from workers.facts import Facts
from workers.guard_hooks import Answer, Guard, PendingCall, SendBack, Stamped
from workers.guards.citations import MAX_SHOWN, UNSUPPORTED, Citations
from workers.guards.named_code import missing_paths, names_code
from workers.guards.test_runs import is_test_run
from workers.log.events import Emitter
from workers.log.schema import Verification
from workers.report_lines import BLIND
from workers.tools.base import ToolResult

if TYPE_CHECKING:
    from workers.check.checker import Checker

OWN_RUN_PASSED = "the agent's own test run passed (gaffer ran no check)"

DEFAULT_MAX_SEND_BACKS = 2  # before an answer goes out marked unverified


@dataclass(frozen=True)
class Verdict:
    verified: bool
    reason: str = ""
    untested: bool = False
    """Files changed and no test ran after: what is missing is a test run, not a fix."""
    check: CheckRun | None = None
    """The run's check, when gaffer ran it over the change: this verdict is its."""
    failed: bool = False
    """Its last test run or gaffer's check failed (not a grep that found none after)."""

    @property
    def line(self) -> str:
        if self.check is not None:
            return f"Check: {self.check.line()}"
        # Only gaffer's own check says "verified" (workers/check/).
        why = OWN_RUN_PASSED if self.verified else f"unverified ({self.reason})"
        return f"Verification: {why}"


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
    # What a test run writes itself (snapshots of expected output, reports) is not a
    # change that needs another test run after it.
    edits = [
        i
        for i, e in enumerate(events)
        # A note to the project memory (`remember`) is not a code change either.
        if (
            e.modified
            and not e.memory
            and not (e.command is not None and is_test_run(e.command, test_runners))
        )
    ]
    if not edits:
        return None
    after = events[edits[-1] + 1 :]
    ran = [e for e in after if e.command is not None and not e.denied]
    tests = [e for e in ran if is_test_run(str(e.command), test_runners)]
    if not tests:
        return Verdict(
            False, "files were changed and no test ran after the last edit", untested=True
        )
    last = tests[-1]
    if last.exit_code != 0:
        return Verdict(
            False, f"the last test run failed: `{last.command}` → {outcome(last)}", failed=True
        )
    if last.no_tests:
        return Verdict(False, f"the last test run ran no tests: `{last.command}`", untested=True)
    unexplained = _still_failing([e for e in ran if e not in tests])
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


NO_CHANGE = (
    "Before you answer: you have changed no files. If the task asks for a change, make it "
    "now and run the tests; if no change is needed, say why in your answer."
)


CHECK_FAILED = (
    "Not done yet: gaffer ran the check `{command}` over your change, in a fresh sandbox "
    "with the task's tests as they were, and it did not pass: {why}. Fix the code, then "
    "answer again. If it truly cannot pass, say exactly why in your answer."
)
UNNUMBERED = (
    "Your answer has no numbered line for {missing}. Answer every numbered question of "
    "the task on its own line, numbered as in the task, in the form it asks for; where "
    "you found nothing, say so on that question's line."
)
EMPTY_ANSWER = (
    "Your reply was empty. Write your final answer now, in plain text and in the form the "
    "task asks for: what you found, with the files that show it."
)


@dataclass
class Gate(Guard):
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
    checker: Checker | None = None
    """The run's check: an answer after a change stands on its verdict, run by gaffer over
    the workspace (`workspace`); None, or a check that cannot run, leaves the agent's own
    evidence to judge."""
    check_task: str = ""
    """What the user asked for, which the check is chosen from."""
    citations: Citations | None = None
    """For a reader given a task: what its calls showed it, which its answer's claims
    must stand on (workers/guards/citations.py); None: not checked."""
    sent_back: int = field(default=0, init=False)
    wants_call: bool = field(default=False, init=False)
    """The last send-back asked for a tool call (a test run, a look at the code): the
    agent's next reply must be one, or a small model repeats its answer word for word."""
    _asked_for_change: bool = field(default=False, init=False)
    _asked_for_form: bool = field(default=False, init=False)
    _unsupported_answer: str = field(default="", init=False)
    """The reader's answer last sent back for its claims."""
    _judged: tuple[int, Verdict | None] | None = field(default=None, init=False)

    def after_call(self, call: PendingCall, result: ToolResult) -> ToolResult:
        if self.citations is not None and not call.refused and not call.held_back:
            self.citations.note(call, result)
        return result

    def on_answer(self, answer: Answer) -> SendBack | None:
        message = self.review(
            answer.facts, answer.text, answer.looked, answer.asked, last=answer.last
        )
        return None if message is None else SendBack(message, self.take_wants_call())

    def review(
        self,
        facts: Sequence[Facts],
        answer: str = "",
        looked: bool | None = None,
        asked: str = "",
        *,
        last: bool = False,
    ) -> str | None:
        """A message sending the agent back to work, or None to let the answer through.
        `asked`: the agent's own task, whose numbered questions a reader answers each.
        `last` (Answer.last): nothing but an empty answer goes back."""
        self.wants_call = False
        can_send = self.sent_back < self.max_send_backs and not last
        if not answer.strip() and self.sent_back < self.max_send_backs:
            # Nothing said is no answer, and asking again loses nothing, time or not.
            self._sent_back_unsupported("the answer was empty")
            return EMPTY_ANSWER
        verdict = self.judged(facts)
        if verdict is None and self.expects_change and not self._asked_for_change and can_send:
            self._asked_for_change = True
            self._sent_back_unsupported("no files changed")
            return NO_CHANGE
        if (
            verdict is None
            and can_send
            and not self._said_again(answer)
            and (problem := self._unsupported(self._looked(facts, looked), answer))
        ):
            self._sent_back_unsupported(problem)
            self._unsupported_answer = answer.strip()
            # An agent that looks through workers mends a wrong name from the reports it
            # has; requiring a call would send a whole new round of workers.
            self.wants_call = not (self.through_workers and looked is not False)
            return (
                f"Before you answer: {problem}. Check with {self.look_with}, then answer "
                "from what they show."
            )
        if verdict is None and not last and (unnumbered := self._unnumbered(asked, answer)):
            return unnumbered
        if verdict is None or verdict.verified or not can_send:
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
        if verdict.check is not None:
            return CHECK_FAILED.format(
                command=verdict.check.command, why=failed_because(verdict.check)
            )
        return (
            f"Not done yet: {verdict.reason}. Run the project's tests (or the failing command) "
            "and fix what fails, then answer again. If it truly cannot pass, say exactly why in "
            "your answer."
        )

    def _unnumbered(self, asked: str, answer: str) -> str | None:
        """A reader's answer with no line for some of its task's numbered questions goes
        back once, apart from the send-backs for its claims: the bench's one explorer
        answered ten of them in one sentence. One that reads through workers is not asked."""
        if self.citations is None or self.through_workers or self._asked_for_form:
            return None
        if not (missing := numbered.unanswered(asked, answer)):
            return None
        self._asked_for_form = True
        shown = ", ".join(map(str, missing))
        self.events.emit(
            Verification(
                verdict="unanswered",
                reason=f"no numbered line for {shown}",
                action="sent_back",
                sent_back=self.sent_back,
            )
        )
        return UNNUMBERED.format(missing=shown)

    def _said_again(self, answer: str) -> bool:
        """A reader's answer word for word the one sent back for its claims: a second
        send-back would get it a third time (a small model cannot mend what it cannot
        find), so it goes on with those claims marked."""
        return self.citations is not None and answer.strip() == self._unsupported_answer

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

    def _looked(self, facts: Sequence[Facts], looked: bool | None) -> bool:
        """Whether it looked at the code: a tool call of its own, or files attached for
        it. A reader whose claims are checked (`citations`) must have made a call: what
        was attached or found for it says where to look, not what the code says."""
        if self.citations is not None:
            return bool(facts)
        return bool(facts) if looked is None else looked

    def _unsupported(self, looked: bool, answer: str) -> str | None:
        if self.must_look and not looked and names_code(answer, self.workspace):
            return "you answered without looking at the code" + self._map_entries(answer)
        if self.workspace is not None and (
            missing := missing_paths(answer, self.workspace, self.container_root)
        ):
            shown = ", ".join(missing[:5])
            return f"your answer names {shown}, which {'is' if len(missing) == 1 else 'are'} not in the workspace"
        if self.citations is not None and (claims := self.citations.unsupported(answer)):
            return "your answer has claims nothing you did shows: " + "; ".join(claims[:MAX_SHOWN])
        return None

    def _still_unsupported(self, answer: str, facts: Sequence[Facts]) -> list[str]:
        """What of a reader's answer is still unsupported when it goes on (its send-backs
        spent), to be said beside it so no one takes it for fact."""
        if self.citations is None or not answer.strip():
            return []
        claims = self.citations.unsupported(answer)
        if self.workspace is not None:  # what no call could have shown: it is not there
            missing = missing_paths(answer, self.workspace, self.container_root)
            claims += [
                f"it names {path}, which is not in the workspace"
                for path in missing
                if not any(claim.startswith(f"it names {path},") for claim in claims)
            ]
        if not facts and names_code(answer, self.workspace):
            claims.insert(0, BLIND)
        return list(dict.fromkeys(claims))

    def _map_entries(self, answer: str) -> str:
        """Where the map has the names an answer made without looking ("" when none)."""
        if self.citations is None:
            return ""
        entries = self.citations.map_entries(answer)
        return f" (the repo map has {'; '.join(entries)})" if entries else ""

    def stamp(self, answer: str, facts: Sequence[Facts]) -> Stamped:
        """The answer with the verdict it was let through on said beside it."""
        verdict = self.judged(facts)
        if verdict is None:
            unseen = self.citations.not_looked_into(answer) if self.citations else ()
            if claims := self._still_unsupported(answer, facts):
                answer = f"{answer.rstrip()}\n\n{UNSUPPORTED}{'; '.join(claims)}"
            return Stamped(answer, self.last_check, tuple(claims), not_looked_into=unseen)
        return Stamped(f"{answer.rstrip()}\n\n{verdict.line}", self.last_check)

    @property
    def last_check(self) -> CheckRun | None:
        """The check the last verdict stood on; None when it was the agent's own evidence."""
        return self._judged[1].check if self._judged and self._judged[1] else None

    def judged(self, facts: Sequence[Facts]) -> Verdict | None:
        """The verdict on the evidence so far: None when nothing was changed; the run's
        check, run by gaffer, when something was and it can run; else the agent's own
        test runs. Judged once for the same evidence (the answer is stamped with the
        verdict it was let through on)."""
        if self._judged is not None and self._judged[0] == len(facts):
            return self._judged[1]
        verdict = judge(facts, self.test_runners)
        # Any change counts here, a test run's own writes too: a command that rewrites
        # the tests and runs them is a change.
        changed = any(e.modified and not e.memory for e in evidence(facts))
        if changed and self.checker is not None and self.workspace is not None:
            done = self.checker.run(self.check_task, self.events, self.workspace)
            if done.verdict != "unchecked":
                failed = done.verdict in ("failed", "timed_out")
                verdict = Verdict(
                    done.verdict == "verified", done.line(), check=done, failed=failed
                )
        self._judged = (len(facts), verdict)
        return verdict
