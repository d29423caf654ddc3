"""Fresh attempts: when a small model is stuck on its own failing code, gaffer asks for the
change again from the files as they were, and keeps only what passes the tests.

A 1.5B coder whose fix failed the tests writes the same code back again and again: its
sampling is near-greedy and its own code is in front of it. Shown its code and the
failure and asked once more (the focused ask), it still writes it back. Asked afresh,
from the task and the files as they were before it began, at a higher temperature, it
writes a different program, and some of those pass (on the bench, one sample in three
for `intervals`, one in five for `rle`; the failing code and its error in the prompt: none
in four). So when the focused ask brought nothing new and the tests still fail, gaffer
draws up to MAX_FRESH_ATTEMPTS samples, once a run. Each is written as the agent's blocks
are (read-before-edit, protected paths) and the test command that failed is run again
in the agent's sandbox. A sample that passes is kept and the agent is told; one that
fails, or changes a test file, is taken back: every file as it was before the sample,
so nothing the agent wrote is lost. Sampling several programs and keeping one that
passes the tests is how AlphaCode and others turn a weak model's tries into solutions.

Every sample is a logged `llm_call` (`aside`, with its `temperature`), every write and
test run a logged `tool_call`, and each attempt a `fresh_attempt` line. A sample taken
back leaves the agent's evidence as it was: the gate judges what is in the workspace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from workers.agent import Agent, AgentResult, first_task, tell
from workers.calls import call_model, limit_if_spent, run_tool
from workers.change_sets import compare
from workers.facts import Facts
from workers.file_blocks import HOW_TO_WRITE, write_blocks
from workers.focused_write import (
    ASK_FOR_CHANGE,
    MAX_TASK_CHARS,
    cut,
    fenced,
    is_test_file,
    texts,
)
from workers.log_schema import FreshAttempt
from workers.model import ToolCall
from workers.repetition import RepetitionGuard
from workers.test_runs import is_test_run
from workers.tools.base import ToolResult
from workers.undo import CannotUndo, undo
from workers.verification import evidence, judge, outcome

# Each costs a call with a prompt of its own (no cache) and a test run, about 15 s on two
# cores: six give a sample that passes one time in five a three-in-four chance.
MAX_FRESH_ATTEMPTS = 6
# Far enough from near-greedy that the same prompt gives other programs; not so far that
# a 1.5B model's code stops parsing.
FRESH_TEMPERATURE = 0.8
KEPT = (
    "Your code still failed the tests, so gaffer asked for the change afresh, from the "
    "files as they were before you began. This was written:\n\n{written}\n\nThe tests "
    "pass now (`{command}`):\n\n{output}\n\nTools are off and the files stay as they "
    "are. In plain sentences, with no code, give your final answer: what was changed and "
    "how it was checked."
)


@dataclass(frozen=True)
class Kept:
    """A sample that passed the tests and stays."""

    attempt: int
    written: str
    command: str

    @property
    def account(self) -> str:
        """What happened, in gaffer's words: the answer when the model gives none."""
        return (
            f"gaffer asked for the change afresh and kept sample {self.attempt}, which passes "
            f"the tests (`{self.command}`):\n\n{self.written}"
        )


def try_afresh(agent: Agent, result: AgentResult, step: int, guard: RepetitionGuard) -> Kept | None:
    """For an agent that writes in blocks and is stuck on a failing test run: samples of
    the change, each kept only when the tests pass. The one kept (the agent has been
    told; its run ends with its answer), or None."""
    command = _failing_test(agent, result)
    if command is None or result.fresh_attempts:
        return None
    ask = prompt(agent, first_task(result.messages))
    if ask is None:
        return None
    for attempt in range(1, MAX_FRESH_ATTEMPTS + 1):
        if limit_if_spent(agent) is not None:
            return None
        result.fresh_attempts = attempt
        if (written := _attempt(agent, result, step, guard, ask, command, attempt)) is not None:
            return Kept(attempt, written, command)
    return None


def _failing_test(agent: Agent, result: AgentResult) -> str | None:
    """The test command whose failure the agent is stuck on: the last test run, failed
    after the agent's last change. None when that is not where it stands."""
    if (
        agent.edits is None
        or agent.changes is None
        or not agent.file_blocks
        or "run_shell" not in agent.tools
        or not agent.edits.last_failure
    ):
        return None
    runners = agent.edits.test_runners
    verdict = judge(result.facts, runners)
    if verdict is None or verdict.verified or verdict.untested:
        return None
    runs = [f for f in evidence(result.facts) if f.command and is_test_run(f.command, runners)]
    last = runs[-1] if runs else None
    if last is None or last.exit_code in (0, None) or last.denied:
        return None
    return last.command


def prompt(agent: Agent, task: str) -> str | None:
    """The task and the files the agent has seen, as they were before it began (code
    first, tests last, within the room for files); None when none can be shown."""
    assert agent.edits is not None and agent.changes is not None
    files = texts(agent.edits.seen, agent.changes.original, agent.room_for_files())
    shown = [f"{path}\n{fenced(text, path)}" for path, text in files]
    if not shown:
        return None
    return "\n\n".join([cut(task, MAX_TASK_CHARS), *shown, f"{ASK_FOR_CHANGE} {HOW_TO_WRITE}"])


def _attempt(
    agent: Agent,
    result: AgentResult,
    step: int,
    guard: RepetitionGuard,
    ask: str,
    command: str,
    attempt: int,
) -> str | None:
    """One sample: what it wrote when the tests pass with it, else None (taken back)."""
    assert agent.edits is not None and agent.changes is not None
    before = agent.changes.look()
    facts_before = len(result.facts)
    failure_before, untested_before = agent.edits.last_failure, agent.edits.untested_edit
    turn = call_model(
        agent,
        [{"role": "user", "content": ask}],
        [],
        step,
        tools_off=True,
        aside=True,
        temperature=FRESH_TEMPERATURE,
    )
    result.tokens += turn.usage.total
    label = f"fresh{attempt}"  # its calls' ids: fresh2-5-1 is the first write of sample 2
    written, _ = write_blocks(agent, result, turn, step, guard, note_unchanged=False, label=label)
    files = sorted({p for f in result.facts[facts_before:] for p in f.modified})

    def logged(kept: bool, reason: str, run: Facts | None = None) -> None:
        agent.events.emit(
            FreshAttempt(
                attempt=attempt,
                temperature=FRESH_TEMPERATURE,
                files=files,
                command=command if run else None,
                exit_code=run.exit_code if run else None,
                kept=kept,
                reason=reason,
            )
        )

    if not files or written is None:
        logged(False, "the sample changed nothing")
        return None
    ran: Facts | None = None
    if tests := [p for p in files if is_test_file(p)]:
        why = f"the sample changed the tests ({', '.join(tests)})"
    else:
        run = _run_tests(agent, command, step, f"{label}-{step}-test")
        result.tool_calls += 1
        result.facts.append(ran := run.facts)
        if ran.exit_code == 0 and not ran.no_tests and not ran.denied:
            logged(True, "the tests pass", ran)
            tell(
                agent,
                result.messages,
                KEPT.format(written=written, command=command, output=_tail(run.output)),
                source="fresh_attempt",
            )
            return written
        why = f"the tests failed ({outcome(ran)})"
    try:
        undo(agent.changes.store, compare(before, agent.changes.store.scan()))
    except CannotUndo as error:  # the sample stays, and so does its evidence
        logged(False, f"{why}; it could not be taken back: {error}", ran)
        return None
    agent.changes.look()
    del result.facts[facts_before:]  # the workspace is as the agent's evidence says again
    agent.edits.last_failure, agent.edits.untested_edit = failure_before, untested_before
    for path in files:  # the agent knows these files: they are its own again
        agent.edits.after("read_file", {"path": path}, ToolResult(output=""))
    logged(False, f"{why}; taken back", ran)
    return None


def _run_tests(agent: Agent, command: str, step: int, call_id: str) -> ToolResult:
    arguments = {"command": command}
    call = ToolCall(id=call_id, name="run_shell", arguments=json.dumps(arguments))
    return run_tool(agent, call, arguments, step, None)


def _tail(output: str, limit: int = 600) -> str:
    return output if len(output) <= limit else "…" + output[-limit:]
