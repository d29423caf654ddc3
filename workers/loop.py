"""The agent loop: one function for every agent, supervisor and workers alike."""

from __future__ import annotations

import dataclasses
import json
import traceback
from typing import Any

from workers import calls, executor
from workers.agent import Agent, AgentResult, first_task, tell
from workers.change_sets import record_change_set
from workers.editing import EDIT_TOOLS
from workers.file_blocks import WRITE_NOW, write_blocks
from workers.focused_write import ask_for_the_change, prose
from workers.fresh_attempts import Kept, try_afresh
from workers.log_schema import AgentEnd, AgentStart, Limit
from workers.model import Message, ModelError, ToolCall, written_call
from workers.outcome import (
    Aborted,
    Failed,
    Finished,
    Interrupted,
    LimitHit,
    Outcome,
    reason_of,
    status_of,
)
from workers.repetition import RepetitionGuard
from workers.sandbox import NodeLost, SandboxFault
from workers.stepping import StoppedByUser
from workers.task_files import task_files
from workers.verification import named_paths

UNREADABLE = (
    "Your last reply could not be read ({error}). Reply again: fewer tool calls, each one "
    "complete, valid JSON."
)
WRAP_UP = (
    "Stop calling tools now. Using only the tool results above, write your final answer "
    "to the task in plain sentences: what you found, with file paths, what you did, and "
    "what is left undone. The task was: {task}"
)
WRAP_UP_AGAIN = (
    "That was a tool call, and no more tools will run. Reply in plain sentences, no JSON: "
    "your final answer from what you already know."
)
ANSWER_NOW = (
    "Tools are paused for this reply. Answer every part of the task now, in plain "
    "sentences, from the tool results above and the workspace at a glance in your "
    "instructions, naming the files and folders: {task}"
)
WRITE_OR_ANSWER = (
    "Tools are paused for this reply. If you know the change, write it now: the file's "
    "path on a line of its own, then its corrected code in a fenced block. Otherwise "
    "answer the task from the tool results above: {task}"
)
TOOLS_BACK = (
    "That call was not run: tools were paused. They are back now. Make a call you have not "
    "made before, or give your final answer in plain sentences."
)
# Replies the server could not read, in a row, before the agent ends: the same prompt
# at near-greedy sampling tends to give the same reply.
MAX_UNREADABLE = 4
# The files a task is about are read for the agent before its first step, as a user's
# @-mention would attach them (workers/task_files.py): a small model that sees the code
# and its tests at once writes the change instead of spending steps finding them.
ATTACHED = "The files your task is about, read for you with read_file (do not repeat them):"
MAX_ATTACHED = 5
WRITTEN_CALL = (
    "Your reply is a tool call written as text, which runs nothing. To use a tool, call it "
    "in the tool-call format; to finish, answer in plain sentences."
)


def run_agent(
    agent: Agent, messages: list[Message], result: AgentResult | None = None
) -> AgentResult:
    """Run until a final answer or a stop; every way out is an Outcome, never an exception.
    `result`, when given, is filled in as the run goes: a caller that stops waiting still
    sees how far it got."""
    if result is None:
        result = AgentResult(outcome=Aborted("not started"), messages=messages)
    agent.events.emit(
        AgentStart(
            model=agent.model.name,
            tools=list(agent.tools),
            sandbox=agent.sandbox.name,
            max_steps=agent.limits.max_steps,
            max_seconds=agent.limits.max_seconds,
            max_tokens=agent.limits.max_tokens,
            snapshot=agent.changes.before_id if agent.changes else None,
            worktree=agent.changes.worktree if agent.changes else None,
        )
    )
    crash: str | None = None
    try:
        if agent.attach_task_files and not _looked(messages):
            _attach_task_files(agent, messages)
        result.outcome = _loop(agent, result)
    except KeyboardInterrupt:
        agent.budget.cancel()  # workers below this agent stop at their next step
        result.outcome = Aborted("interrupted by the user")
    except StoppedByUser:
        agent.budget.cancel()
        result.outcome = Aborted("stopped by the user at a step")
    except ModelError as error:
        result.outcome = calls.limit_if_spent(agent) or Failed(error.message, kind=error.kind)
    except NodeLost as error:
        result.outcome = Interrupted(str(error))
    except SandboxFault as error:  # the container broke or misbehaved: this agent ends
        result.outcome = Failed(str(error), kind="sandbox")
    except Exception as error:  # a harness fault: the run ends, the log keeps the traceback
        result.outcome = Failed(f"{type(error).__name__}: {error}")
        crash = traceback.format_exc(limit=8)
    calls.answer_unanswered(messages, reason_of(result.outcome))
    if agent.changes is not None:
        result.changes = record_change_set(agent.changes, agent.events)
        result.ignored_changes = agent.changes.ignored
    if isinstance(result.outcome, LimitHit):
        agent.events.emit(Limit(limit=result.outcome.limit, detail=result.outcome.detail))
    agent.events.emit(
        AgentEnd(
            status=status_of(result.outcome),
            reason=reason_of(result.outcome),
            steps=result.steps,
            tokens=result.tokens,
            tool_calls=result.tool_calls,
            answer=_answer_of(result.outcome),
            traceback=crash,
        )
    )
    return result


def _loop(agent: Agent, result: AgentResult) -> Outcome:
    messages = result.messages
    # An editor is paused only when it writes in blocks: paused, it can still write.
    guard = RepetitionGuard(
        pauses=agent.edits is None or agent.file_blocks,
        write_hint=WRITE_NOW if agent.file_blocks else "",
        reads_only=agent.edits is None,  # it edits nothing itself: a result cannot move
    )
    offered = [
        tool for name, tool in agent.tools.items() if not (agent.file_blocks and name in EDIT_TOOLS)
    ]
    schemas = [tool.schema() for tool in offered]
    paused, unreadable, must_call, noted_echo = False, 0, False, False
    for step in range(1, agent.limits.max_steps + 1):
        if stop := calls.limit_if_spent(agent):
            return stop
        result.steps = step
        if agent.context is not None and (
            full := agent.context.prepare(
                messages,
                result.facts,
                step,
                model=agent.model,
                budget=agent.budget,
                events=agent.events,
            )
        ):
            return full
        if step == agent.limits.max_steps:
            return _wrap_up(agent, result, schemas, LimitHit("steps", f"used all {step} steps"))
        try:
            must_call |= agent.look_first and not _looked(messages)
            turn = calls.call_model(
                agent, messages, schemas, step, tools_off=paused, require_tool=must_call
            )
        except ModelError as error:
            if error.kind != "malformed_output" or (unreadable := unreadable + 1) >= MAX_UNREADABLE:
                raise
            tell(agent, messages, UNREADABLE.format(error=error.message), source="model_error")
            paused = unreadable > 1  # asked again, the same reply would fail again: prose
            continue
        unreadable, must_call = 0, False
        result.tokens += turn.usage.total
        messages.append(turn.as_message())
        # Files written as blocks are written before the reply's calls run (a test run),
        # tools paused or not: a block is the model's work, not a call.
        written, echo = write_blocks(
            agent, result, turn, step, guard, note_unchanged=not noted_echo
        )
        noted_echo |= echo
        if not turn.tool_calls and not written:
            if ask_for_the_change(agent, result, step, guard, said=turn.text):
                paused, must_call = False, True  # the next reply runs the tests
                continue
            if kept := try_afresh(agent, result, step, guard):
                return _answer_after(agent, result, schemas, kept)
            if (answer := _answer(agent, result, turn.text, paused, guard)) is not None:
                return answer
            paused, must_call = False, agent.gate is not None and agent.gate.take_wants_call()
            continue
        for call, tool_result in zip(
            turn.tool_calls, calls.run_batch(agent, turn, step, guard), strict=False
        ):
            result.tool_calls += 1
            result.facts.append(tool_result.facts)
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": tool_result.output}
            )
            if tool_result is not calls.DUPLICATE:
                guard.observe(call, tool_result)
        if written:
            tell(agent, messages, written, source="file_blocks")
        if guard.stop is not None:  # stopped for going in circles: still ask what it found
            calls.answer_unanswered(messages, reason_of(guard.stop))
            return _wrap_up(agent, result, schemas, guard.stop)
        if stop := calls.limit_if_spent(agent):
            return stop  # calls the batch did not reach are answered as not run
        nudge, paused = guard.take_nudge(), guard.take_pause()
        if (nudge or paused) and ask_for_the_change(agent, result, step, guard, said=""):
            if nudge:  # the warning is shown all the same: going round again ends the run
                tell(agent, messages, nudge, source="repetition")
            paused, must_call = False, True
            continue
        if (nudge or paused) and (kept := try_afresh(agent, result, step, guard)):
            return _answer_after(agent, result, schemas, kept)
        if nudge or paused:
            now = WRITE_OR_ANSWER if agent.file_blocks else ANSWER_NOW
            answer_now = now.format(task=_task(messages)) if paused else ""
            tell(
                agent, messages, "\n\n".join(filter(None, [nudge, answer_now])), source="repetition"
            )
    return LimitHit("steps", f"used all {agent.limits.max_steps} steps")


def _answer(
    agent: Agent, result: AgentResult, text: str, paused: bool, guard: RepetitionGuard
) -> Finished | None:
    """A reply without tool calls: the final answer, or None when it goes back (a call
    written as text, or an answer the gate sends back with its reason)."""
    if written_call(text, agent.tools):
        tell(agent, result.messages, TOOLS_BACK if paused else WRITTEN_CALL, source="model_error")
        return None
    looked = _looked(result.messages)
    if agent.gate is not None and (send_back := agent.gate.review(result.facts, text, looked)):
        tell(agent, result.messages, send_back, source="verification")
        guard.sent_back()
        return None
    return Finished(_stamped(agent, text, result))


def _looked(messages: list[Message]) -> bool:
    """Whether the conversation has tool results or attached files (in this run, or the
    one it resumes)."""
    return any(
        m.get("role") == "tool" or str(m.get("content") or "").startswith(ATTACHED)
        for m in messages
    )


def _attach_task_files(agent: Agent, messages: list[Message]) -> None:
    """The files the task is about, read with the agent's own read_file in its own
    sandbox and told to it as one message: those it names, or for an agent that edits,
    those its words are in, and what they import. A name that is not a readable file is
    left out unsaid; together they take at most two results' share of the window."""
    room = agent.room_for_files()
    last = messages[-1] if messages and messages[-1]["role"] == "user" else None
    task, root = str(last["content"]) if last else "", agent.container_root
    paths = (
        task_files(agent.edits.workspace, task, root)
        if agent.edits is not None
        else named_paths(task, root)
    )
    attached: list[str] = []
    for path in paths:
        arguments = {"path": path}
        call = ToolCall(id="attach", name="read_file", arguments=json.dumps(arguments))
        result = executor.execute(
            call, arguments, agent.tools, agent.sandbox, agent.budget, agent.max_output_chars
        )
        if result.is_error or len(result.output) > room:
            continue
        room -= len(result.output)
        attached.append(f'<file path="{path}">\n{result.output.rstrip()}\n</file>')
        if agent.edits is not None:
            agent.edits.after("read_file", arguments, result)
        if len(attached) == MAX_ATTACHED:
            break
    if attached:
        tell(agent, messages, "\n\n".join([ATTACHED, *attached]), source="attachment")


def _wrap_up(
    agent: Agent, result: AgentResult, schemas: list[dict[str, Any]], stop: LimitHit
) -> Outcome:
    """After a step or repetition limit: one more call, tools off, for an answer in prose.
    A reply that is only a tool call (called anyway, or written out as text) is asked
    once more; a second is no answer."""
    messages = result.messages
    for ask in (WRAP_UP.format(task=_task(messages)), WRAP_UP_AGAIN):
        tell(agent, messages, ask, source="wrap_up")
        try:
            turn = calls.call_model(agent, messages, schemas, result.steps, tools_off=True)
        except ModelError as error:
            if error.kind != "malformed_output":
                raise
            continue
        result.tokens += turn.usage.total
        messages.append(turn.as_message())
        if not turn.tool_calls and not written_call(turn.text, agent.tools):
            return dataclasses.replace(stop, answer=_stamped(agent, turn.text, result))
        calls.answer_unanswered(messages, "tools are off: the run is wrapping up")
    return dataclasses.replace(
        stop, detail=f"{stop.detail}; the model gave no answer, only tool calls"
    )


def _answer_after(
    agent: Agent, result: AgentResult, schemas: list[dict[str, Any]], kept: Kept
) -> Finished:
    """The tests pass, run by gaffer (with a change it drew afresh, or with the agent's own
    code under its task's test command): the run ends with the model's account of it,
    asked with tools off and its code blocks not written (a small model writes its own
    failing code back), or gaffer's account when the model gives none."""
    messages, said = result.messages, ""
    try:
        turn = calls.call_model(agent, messages, schemas, result.steps, tools_off=True)
    except ModelError:
        turn = None  # the change stands; the account is gaffer's
    if turn is not None:
        result.tokens += turn.usage.total
        messages.append(turn.as_message())
        calls.answer_unanswered(messages, "tools are off: the tests pass and the run ends")
        if not turn.tool_calls and not written_call(turn.text, agent.tools):
            said = prose(turn.text)
    return Finished(_stamped(agent, said or kept.account, result))


def _task(messages: list[Message]) -> str:
    """What the agent was asked, shortened: restated when it is asked to answer."""
    return _short(first_task(messages), 300)


def _short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _stamped(agent: Agent, answer: str, result: AgentResult) -> str:
    answer = _unfenced(answer)
    return agent.gate.stamp(answer, result.facts) if agent.gate is not None else answer


def _unfenced(text: str) -> str:
    """Prose a small model began with the opening of a call (tools off, it wrote "```json"
    and then its answer): the stray fence goes, the answer stays."""
    stripped = text.strip()
    if not stripped.startswith("```json"):
        return text
    body = stripped.removeprefix("```json").strip()
    if body.count("```") % 2 == 1:
        body = body.rsplit("```", 1)[0].rstrip()
    return body


def _answer_of(outcome: Outcome) -> str:
    return outcome.answer if isinstance(outcome, Finished | LimitHit) else ""
