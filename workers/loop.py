"""The agent loop: one function for every agent, supervisor and workers alike.

Call the model; run the reply's tool calls; repeat until a final answer or a stop. What
varies between agents steps in at the seam, never as a branch here: the loop names no
aid, and asks the agent's aids at five moments (workers/hooks.py: before the first step,
after each reply, after its calls to act on them and then to say whether the next reply
is the answer, and when the agent is stuck); and it names no guard, whose call-level
moments (workers/guard_hooks.py: before each step, around each model call and tool call,
after a batch, on an answer) hold it back and judge it.
"""

from __future__ import annotations

import dataclasses
import traceback
from typing import Any

from workers import calls
from workers.agent import Agent, AgentResult, answer_unanswered, first_task, tell
from workers.agent_view import AgentView
from workers.changes.tracker import record_change_set
from workers.guard_hooks import Answer, StepStart
from workers.hooks import Finish, Note, Resume, looked
from workers.log.schema import AgentEnd, AgentStart, Limit
from workers.model import AssistantTurn, Message, ModelError, written_call
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
from workers.report_lines import LEFT_OUT
from workers.sandbox import NodeLost, SandboxFault
from workers.stepping import StoppedByUser

UNREADABLE = (
    "Your last reply could not be read ({error}). Reply again: fewer tool calls, each one "
    "complete, valid JSON."
)
WRAP_UP = (
    "Stop calling tools now. Using only the tool results above, write your final answer "
    "to the task in plain text, no tool call, in the form the task asks for: what you "
    "found, with file paths, what you did, and what is left undone. The task was: {task}"
)
WRAP_UP_AGAIN = (
    "That was a tool call, and no more tools will run. Reply in plain text, no JSON, in "
    "the form the task asks for: your final answer from what you already know."
)
ANSWER_NOW = (
    "Tools are paused for this reply. Answer every part of the task now, in plain text "
    "and in the form the task asks for, from the tool results above and the workspace at "
    "a glance in your instructions, naming the files and folders: {task}"
)
TASK_RESTATED = 1500
TOOLS_BACK = (
    "That call was not run: tools were paused. They are back now. Make a call you have not "
    "made before, or give your final answer in plain text, in the form the task asks for."
)
ASKED_AGAIN = UNREADABLE[: UNREADABLE.index("{")]
# Replies the server could not read, in a row, before the agent ends: the same prompt
# at near-greedy sampling tends to give the same reply.
MAX_UNREADABLE = 4
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
        result.outcome = _loop(agent, result)
    except KeyboardInterrupt:
        agent.budget.cancel()  # workers below this agent stop at their next step
        result.outcome = Aborted("interrupted by the user")
    except StoppedByUser:
        agent.budget.cancel()
        result.outcome = Aborted("stopped by the user at a step")
    except ModelError as error:
        result.outcome = calls.limit_if_spent(agent) or (
            LimitHit("output", error.message)
            if error.kind == calls.OUTPUT_LIMIT
            else Failed(error.message, kind=error.kind)
        )
        if isinstance(result.outcome, LimitHit) and error.partial.strip():
            # what the user watched it write, cut where the limit came: the partial answer
            result.outcome = dataclasses.replace(result.outcome, answer=error.partial.strip())
    except NodeLost as error:
        result.outcome = Interrupted(str(error))
    except SandboxFault as error:  # the container broke or misbehaved: this agent ends
        result.outcome = Failed(str(error), kind="sandbox")
    except Exception as error:  # a harness fault: the run ends, the log keeps the traceback
        result.outcome = Failed(f"{type(error).__name__}: {error}")
        crash = traceback.format_exc(limit=8)
    answer_unanswered(messages, reason_of(result.outcome))
    result.outcome = _with_sent_back(agent, result)
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
    messages, aids, guards = result.messages, agent.aids, agent.guards
    schemas = [tool.schema() for n, tool in agent.tools.items() if n not in aids.hidden_tools]
    view = AgentView(agent, result, schemas)
    if (finish := aids.before_first_step(view)) is not None:
        return Finished(_finished(agent, finish, result))
    # Calls an aid made before the first step may already hold what answers the task.
    paused, must_call = aids.answer_next(view), False
    if paused:
        tell(agent, messages, _answer_now(agent, messages), source="task_parts")
    for step in range(1, agent.limits.max_steps + 1):
        if stop := _before_step(agent, result, step, schemas):
            return stop
        view.step, must_call = step, must_call or _must_look(agent, result)
        try:
            turn = calls.call_model(
                agent, messages, schemas, step, tools_off=paused, require_tool=must_call
            )
        except ModelError as error:
            paused = _unreadable(agent, messages, error)
            continue
        must_call, result.tokens = False, result.tokens + turn.usage.total
        messages.append(turn.as_message())
        note = aids.after_reply(view, turn)  # blocks written before the reply's calls run
        if not turn.tool_calls and note is None:
            ending = _would_stop(agent, view, result, turn.text, paused)
            if isinstance(ending, Finished):
                return ending
            paused, must_call = False, ending
            continue
        _run_calls(agent, result, turn, step, note)
        guards.after_batch()
        aids.after_calls(view)
        if stop := _after_calls(agent, result, schemas):
            return stop
        # Every batch is shown to the aids, which may want it answered next; so may the
        # guards (workers/guards/time_left.py: no time for another step and an answer).
        answer_next = aids.answer_next(view)
        nudge, paused = guards.take_nudge(), guards.take_pause() or answer_next
        if nudge or paused:
            step_on = _going_round(agent, view, result, nudge, paused)
            if isinstance(step_on, Finished):
                return step_on
            if step_on:  # an aid told it what to do: tools back, a call next
                paused, must_call = False, True
    return LimitHit("steps", f"used all {agent.limits.max_steps} steps")


def _before_step(
    agent: Agent, result: AgentResult, step: int, schemas: list[dict[str, Any]]
) -> Outcome | None:
    """Why the agent stops before this step, or None: out of budget, a guard stopped it
    (the window cannot hold the conversation even fitted), or (asked for its answer
    first) its last step."""
    if stop := calls.limit_if_spent(agent):
        return stop
    result.steps = step
    start = StepStart(result.messages, result.facts, step, agent.model, agent.budget, agent.events)
    if stop := agent.guards.before_step(start):
        return stop
    if step == agent.limits.max_steps:
        return _wrap_up(agent, result, schemas, LimitHit("steps", f"used all {step} steps"))
    return None


def _must_look(agent: Agent, result: AgentResult) -> bool:
    """Whether its next reply must be a call, as one that has not looked yet."""
    if agent.calls_first and not any(m.get("role") == "tool" for m in result.messages):
        return True  # none of its own calls yet, in this run or the one it resumes
    return agent.look_first and not looked(result.messages)


def _unreadable(agent: Agent, messages: list[Message], error: ModelError) -> bool:
    """A reply the server could not read is asked for again, with tools paused from the
    second in a row (the same prompt tends to give the same reply); the error goes on up
    when it is not that, or the MAX_UNREADABLE-th in a row. Whether tools are paused."""
    if error.kind != "malformed_output":
        raise error
    in_a_row = 1
    for message in reversed(messages):
        if message["role"] != "user" or not str(message["content"]).startswith(ASKED_AGAIN):
            break
        in_a_row += 1
    if in_a_row >= MAX_UNREADABLE:
        raise error
    tell(agent, messages, UNREADABLE.format(error=error.message), source="model_error")
    return in_a_row > 1


def _would_stop(
    agent: Agent, view: AgentView, result: AgentResult, said: str, paused: bool
) -> Finished | bool:
    """A reply with no call that did nothing: the run's answer (an aid's, or the model's
    once the gate takes it), or whether the next reply must be a call."""
    step_on = _when_stuck(agent, view, said)
    if isinstance(step_on, Finish):
        return Finished(_finished(agent, step_on, result))
    if step_on is not None:
        return True  # the aid told it what to do next
    return _answer(agent, result, said, paused)


def _when_stuck(agent: Agent, view: AgentView, said: str) -> Resume | Finish | None:
    """The aids' answer to a stuck agent. One that stepped in changed what the agent
    stands on, so its next reply is not held against the one before (`again`)."""
    step_on = agent.aids.when_stuck(view, said=said)
    if step_on is not None:
        agent.guards.stepped_in()
    return step_on


def _going_round(
    agent: Agent, view: AgentView, result: AgentResult, nudge: str | None, paused: bool
) -> Finished | bool:
    """After a batch that went round in circles, or one an aid wants answered: an aid's
    answer, or whether an aid stepped in. The warning is shown all the same (going round
    again ends the run), and a paused agent no aid helped is asked to answer now."""
    step_on = _when_stuck(agent, view, "")
    if isinstance(step_on, Finish):
        return Finished(_finished(agent, step_on, result))
    answer_now = _answer_now(agent, result.messages) if paused and step_on is None else ""
    if told := "\n\n".join(filter(None, [nudge, answer_now])):
        tell(agent, result.messages, told, source="repetition")
    return step_on is not None


def _answer_now(agent: Agent, messages: list[Message]) -> str:
    return (agent.aids.answer_now or ANSWER_NOW).format(task=_task(messages))


def _after_calls(
    agent: Agent, result: AgentResult, schemas: list[dict[str, Any]]
) -> Outcome | None:
    """Why the run ends after a batch: a guard stopped it, going in circles (it is still
    asked what it found), or out of budget (calls the batch did not reach are answered
    as not run)."""
    if (stop := agent.guards.stopped()) is not None:
        answer_unanswered(result.messages, reason_of(stop))
        return _wrap_up(agent, result, schemas, stop)
    return calls.limit_if_spent(agent)


def _run_calls(
    agent: Agent,
    result: AgentResult,
    turn: AssistantTurn,
    step: int,
    note: Note | None,
) -> None:
    """The reply's calls run, each result in the conversation; then what an aid had to
    say about the reply."""
    for call, tool_result in zip(turn.tool_calls, calls.run_batch(agent, turn, step), strict=False):
        result.tool_calls += 1
        result.facts.append(tool_result.facts)
        messages = result.messages
        messages.append({"role": "tool", "tool_call_id": call.id, "content": tool_result.output})
    if note is not None:
        tell(agent, result.messages, note.content, source=note.source)


def _answer(agent: Agent, result: AgentResult, text: str, paused: bool) -> Finished | bool:
    """A reply without tool calls: the final answer, or whether its next reply must be a
    call when it goes back (a call written as text, or an answer a guard sends back with
    its reason: the gate's asking for a test run first wants a call)."""
    if written_call(text, agent.tools):
        tell(agent, result.messages, TOOLS_BACK if paused else WRITTEN_CALL, source="model_error")
        return False
    last = agent.budget.no_time_for_another_step(agent.model.name)
    answer = Answer(
        text, result.facts, looked(result.messages), first_task(result.messages), last=last
    )
    if (send_back := agent.guards.on_answer(answer)) is not None:
        result.sent_back = text
        tell(agent, result.messages, send_back.message, source="verification")
        return send_back.wants_call
    return Finished(_stamped(agent, text, result))


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
        answer_unanswered(messages, "tools are off: the run is wrapping up")
    return dataclasses.replace(
        stop, detail=f"{stop.detail}; the model gave no answer, only tool calls"
    )


def _task(messages: list[Message]) -> str:
    """What the agent was asked, restated when it is asked to answer: whole up to
    TASK_RESTATED characters, its parts and the form it asks for with it (cut at 300, a
    survey's ten questions kept three, and its "numbered list" none)."""
    task = first_task(messages).strip()
    return task if len(task) <= TASK_RESTATED else _short(task, TASK_RESTATED)


def _short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _finished(agent: Agent, finish: Finish, result: AgentResult) -> str:
    """An aid's answer as the run's, stamped by the gate; or, made of what gaffer checked
    already, with what it left out said after it, and as the agent's last message (no
    reply of the model's has it, and a chat's next turn must know what was answered)."""
    if not finish.made_of_checked:
        return _stamped(agent, finish.answer, result)
    result.unsupported = finish.left_out
    answer = result.answer_alone = finish.answer
    if finish.left_out:
        answer = f"{answer.rstrip()}\n\n{LEFT_OUT}{'; '.join(finish.left_out)}"
    result.messages.append({"role": "assistant", "content": answer})
    return answer


def _stamped(agent: Agent, answer: str, result: AgentResult) -> str:
    result.answer_alone = _unfenced(answer)
    stamped = agent.guards.stamp(result.answer_alone, result.facts)
    result.check, result.unsupported = stamped.check, stamped.unsupported
    result.not_looked_into = stamped.not_looked_into
    return stamped.answer


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


def _with_sent_back(agent: Agent, result: AgentResult) -> Outcome:
    """A checked reader (`calls_first`; not an editor, whose answer the check judges) out
    of time or steps before it answered again gives the answer the gate sent back, its
    unsupported claims said beside it: one wrong file of ten loses the one, not the ten."""
    outcome, kept = result.outcome, result.sent_back
    if isinstance(outcome, LimitHit) and not outcome.answer.strip() and agent.calls_first and kept:
        return dataclasses.replace(outcome, answer=_stamped(agent, kept, result))
    return outcome


def _answer_of(outcome: Outcome) -> str:
    return outcome.answer if isinstance(outcome, Finished | LimitHit) else ""
