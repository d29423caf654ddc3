"""The agent loop: one function for every agent, supervisor and workers alike."""

from __future__ import annotations

import dataclasses
import json
import time
import traceback
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any

from workers import executor, focused_write
from workers.context import ContextKeeper
from workers.editing import EDIT_TOOLS, EditGuard
from workers.events import Emitter
from workers.file_blocks import WRITE_NOW, read_blocks
from workers.limits import Budget, Limits
from workers.model import AssistantTurn, Message, Model, ModelError, ToolCall, written_call
from workers.outcome import Aborted, Failed, Finished, LimitHit, Outcome, reason_of, status_of
from workers.repetition import RepetitionGuard
from workers.sandbox import Sandbox, SandboxFault
from workers.task_files import task_files
from workers.tools.base import Tool, ToolResult
from workers.verification import DEFAULT_TEST_COMMANDS, Gate, judge, named_paths

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
    "Tools are paused for this reply. Answer the task now, in plain sentences, from the "
    "tool results above, naming the files and folders you saw: {task}"
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
MAX_ATTACHED_CHARS = 48_000  # when the model's window is not known
UNCHANGED_BLOCKS = (
    "Nothing was written: your blocks match the files as they are ({files}). Next, run "
    "the tests with run_shell, or give your final answer in plain sentences."
)
WRITTEN_CALL = (
    "Your reply is a tool call written as text, which runs nothing. To use a tool, call it "
    "in the tool-call format; to finish, answer in plain sentences."
)


@dataclass
class Agent:
    model: Model
    tools: dict[str, Tool[Any]]
    sandbox: Sandbox
    events: Emitter
    limits: Limits = field(default_factory=Limits)
    budget: Budget = field(default_factory=Budget)
    """Tokens, time and cancellation, shared with the agents above this one."""
    pool: Executor | None = None
    """Runs the calls of a batch that may overlap; without one, every call runs in order."""
    gate: Gate | None = None
    """Checks a final answer against the evidence; None answers without checking."""
    context: ContextKeeper | None = None
    """Keeps the conversation within the model's context window; None keeps everything."""
    max_output_chars: int | None = None
    """The most one tool result may hold (an eighth of the model's window); None: the
    tools' own maxima."""
    edits: EditGuard | None = None
    """Read before edit, and where a failed test points; for agents that edit files."""
    look_first: bool = False
    """Its first reply must be a tool call: a worker with a task about the code looks
    before it answers (small models otherwise answer from what they imagine)."""
    attach_task_files: bool = False
    """Read the files its task is about before the first step (it has read_file)."""
    container_root: str | None = None
    """Where its sandbox mounts the workspace (`/workspace`), if anywhere."""
    file_blocks: bool = False
    """It writes files as fenced blocks in its replies (workers/file_blocks.py): it is not
    offered write_file and edit_file, and each block becomes a write_file call."""


@dataclass
class AgentResult:
    outcome: Outcome
    messages: list[Message]
    steps: int = 0
    tokens: int = 0
    tool_calls: int = 0
    facts: list[dict[str, Any]] = field(default_factory=list)
    """What each tool call taught the harness (files written, exit codes), in order."""
    focused_writes: int = 0
    """Times it was asked for the change outside the conversation (workers/focused_write.py)."""


def run_agent(agent: Agent, messages: list[Message]) -> AgentResult:
    """Run until a final answer or a stop; every way out is an Outcome, never an exception."""
    result = AgentResult(outcome=Aborted("not started"), messages=messages)
    agent.events.emit(
        "agent_start",
        model=agent.model.name,
        tools=list(agent.tools),
        sandbox=agent.sandbox.name,
        max_steps=agent.limits.max_steps,
        max_seconds=agent.limits.max_seconds,
        max_tokens=agent.limits.max_tokens,
    )
    crash: dict[str, str] = {}
    try:
        if agent.attach_task_files and not _looked(messages):
            _attach_task_files(agent, messages)
        result.outcome = _loop(agent, result)
    except KeyboardInterrupt:
        agent.budget.cancel()  # workers below this agent stop at their next step
        result.outcome = Aborted("interrupted by the user")
    except ModelError as error:
        result.outcome = _limit_if_spent(agent) or Failed(error.message, kind=error.kind)
    except SandboxFault as error:  # the container broke or misbehaved: this agent ends
        result.outcome = Failed(str(error), kind="sandbox")
    except Exception as error:  # a harness fault: the run ends, the log keeps the traceback
        result.outcome = Failed(f"{type(error).__name__}: {error}")
        crash["traceback"] = traceback.format_exc(limit=8)
    _answer_unanswered(messages, reason_of(result.outcome))
    if isinstance(result.outcome, LimitHit):
        agent.events.emit("limit", limit=result.outcome.limit, detail=result.outcome.detail)
    agent.events.emit(
        "agent_end",
        status=status_of(result.outcome),
        reason=reason_of(result.outcome),
        steps=result.steps,
        tokens=result.tokens,
        tool_calls=result.tool_calls,
        answer=_answer_of(result.outcome),
        **crash,
    )
    return result


def _loop(agent: Agent, result: AgentResult) -> Outcome:
    messages = result.messages
    # An editor is paused only when it writes in blocks: paused, it can still write.
    guard = RepetitionGuard(
        pauses=agent.edits is None or agent.file_blocks,
        write_hint=WRITE_NOW if agent.file_blocks else "",
    )
    offered = [
        tool for name, tool in agent.tools.items() if not (agent.file_blocks and name in EDIT_TOOLS)
    ]
    schemas = [tool.schema() for tool in offered]
    paused, unreadable, must_call, noted_echo = False, 0, False, False
    for step in range(1, agent.limits.max_steps + 1):
        if stop := _limit_if_spent(agent):
            return stop
        result.steps = step
        if agent.context is not None and (
            full := agent.context.prepare(agent, messages, result.facts, step)
        ):
            return full
        if step == agent.limits.max_steps:
            return _wrap_up(agent, result, schemas, LimitHit("steps", f"used all {step} steps"))
        try:
            must_call |= agent.look_first and not _looked(messages)
            turn = _call_model(
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
        written, echo = _write_blocks(
            agent, result, turn, step, guard, note_unchanged=not noted_echo
        )
        noted_echo |= echo
        if not turn.tool_calls and not written:
            if _ask_for_the_change(agent, result, step, guard, said=turn.text):
                paused, must_call = False, True  # the next reply runs the tests
                continue
            if (answer := _answer(agent, result, turn.text, paused)) is not None:
                return answer
            paused, must_call = False, agent.gate is not None and agent.gate.take_wants_call()
            continue
        for call, tool_result in zip(
            turn.tool_calls, _run_batch(agent, turn, step, guard), strict=False
        ):
            result.tool_calls += 1
            result.facts.append(tool_result.facts)
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": tool_result.output}
            )
            if tool_result is not _DUPLICATE:
                guard.observe(call, tool_result)
        if written:
            tell(agent, messages, written, source="file_blocks")
        if guard.stop is not None:  # stopped for going in circles: still ask what it found
            _answer_unanswered(messages, reason_of(guard.stop))
            return _wrap_up(agent, result, schemas, guard.stop)
        if stop := _limit_if_spent(agent):
            return stop  # calls the batch did not reach are answered as not run
        nudge, paused = guard.take_nudge(), guard.take_pause()
        if (nudge or paused) and _ask_for_the_change(agent, result, step, guard, said=""):
            paused, must_call = False, True
            continue
        if nudge or paused:
            now = WRITE_OR_ANSWER if agent.file_blocks else ANSWER_NOW
            answer_now = now.format(task=_task(messages)) if paused else ""
            tell(
                agent, messages, "\n\n".join(filter(None, [nudge, answer_now])), source="repetition"
            )
    return LimitHit("steps", f"used all {agent.limits.max_steps} steps")


def _answer(agent: Agent, result: AgentResult, text: str, paused: bool) -> Finished | None:
    """A reply without tool calls: the final answer, or None when it goes back (a call
    written as text, or an answer the gate sends back with its reason)."""
    if written_call(text, agent.tools):
        tell(agent, result.messages, TOOLS_BACK if paused else WRITTEN_CALL, source="model_error")
        return None
    looked = _looked(result.messages)
    if agent.gate is not None and (send_back := agent.gate.review(result.facts, text, looked)):
        tell(agent, result.messages, send_back, source="verification")
        return None
    return Finished(_stamped(agent, text, result))


def _ask_for_the_change(
    agent: Agent, result: AgentResult, step: int, guard: RepetitionGuard, *, said: str
) -> bool:
    """For an agent that writes in blocks and stalls with a change still to make: ask
    for it in a call of its own, the files in front of the model, and write its blocks.
    Whether anything was written (the agent is told what, and goes on to test it)."""
    if (
        agent.edits is None
        or not agent.file_blocks
        or result.focused_writes >= focused_write.MAX_FOCUSED_WRITES
        or not _stalled(agent, result)
    ):
        return False
    room = 2 * agent.max_output_chars if agent.max_output_chars else MAX_ATTACHED_CHARS
    ask = focused_write.prompt(_first_task(result.messages), agent.edits, said, room)
    if ask is None:
        return False
    result.focused_writes += 1
    turn = _call_model(
        agent, [{"role": "user", "content": ask}], [], step, tools_off=True, aside=True
    )
    result.tokens += turn.usage.total
    changes = sum(bool(fact.get("modified")) for fact in result.facts)
    written, _ = _write_blocks(
        agent, result, turn, step, guard, note_unchanged=False, label="focused"
    )
    if not written or sum(bool(fact.get("modified")) for fact in result.facts) == changes:
        return False
    tell(agent, result.messages, focused_write.told(turn.text, written), source="focused_write")
    return True


def _stalled(agent: Agent, result: AgentResult) -> bool:
    """Whether a change is still to make: none made and the task asks for one (or a test
    failed), or the tests failed after the last one."""
    assert agent.edits is not None
    commands = agent.gate.test_commands if agent.gate is not None else DEFAULT_TEST_COMMANDS
    verdict = judge(result.facts, commands)
    failed = bool(agent.edits.last_failure)
    if verdict is None:
        return failed or focused_write.asks_for_change(_first_task(result.messages))
    return failed and not verdict.verified and not verdict.untested


def _write_blocks(
    agent: Agent,
    result: AgentResult,
    turn: AssistantTurn,
    step: int,
    guard: RepetitionGuard,
    *,
    note_unchanged: bool,
    label: str = "block",
) -> tuple[str | None, bool]:
    """Runs the file blocks of a reply as write_file calls: what each did, for the agent,
    or None when the reply has none (or the agent does not write in blocks); and whether
    that is only the note that the blocks change nothing.

    The reply stays in the conversation as the model wrote it and the results go back as
    one message: the model never sees its code again as an escaped JSON string. A reply
    of nothing but blocks that change nothing (a small model echoing what it wrote) is
    told so once, rather than taken for a final answer."""
    if not agent.file_blocks or agent.edits is None:
        return None, False
    cut = turn.finish_reason == "length"
    blocks = read_blocks(turn.text, agent.edits, f"{label}-{step}", cut=cut)
    if not blocks.calls and not blocks.problems:
        if blocks.unchanged and note_unchanged and not turn.tool_calls:
            return UNCHANGED_BLOCKS.format(files=", ".join(blocks.unchanged)), True
        return None, False
    outcomes = []
    for call in blocks.calls:
        arguments = json.loads(call.arguments)
        # Checked like any call, so a test run after it is not "the same call again".
        refusal = guard.check(call.name, _same_call_key(call, arguments))
        tool_result = _run_tool(agent, call, arguments, step, refusal, from_block=True)
        result.tool_calls += 1
        result.facts.append(tool_result.facts)
        guard.observe(call, tool_result)
        path, said = arguments["path"], tool_result.output
        outcomes.append(said if path in said else f"{path}: {said}")
    return "\n\n".join(outcomes + blocks.problems), False


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
    room = 2 * agent.max_output_chars if agent.max_output_chars else MAX_ATTACHED_CHARS
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
            turn = _call_model(agent, messages, schemas, result.steps, tools_off=True)
        except ModelError as error:
            if error.kind != "malformed_output":
                raise
            continue
        result.tokens += turn.usage.total
        messages.append(turn.as_message())
        if not turn.tool_calls and not written_call(turn.text, agent.tools):
            return dataclasses.replace(stop, answer=_stamped(agent, turn.text, result))
        _answer_unanswered(messages, "tools are off: the run is wrapping up")
    return dataclasses.replace(
        stop, detail=f"{stop.detail}; the model gave no answer, only tool calls"
    )


def _task(messages: list[Message]) -> str:
    """What the agent was asked, shortened: restated when it is asked to answer."""
    return _short(_first_task(messages), 300)


def _first_task(messages: list[Message]) -> str:
    return next((str(m["content"]) for m in messages if m["role"] == "user"), "")


def _short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def tell(agent: Agent, messages: list[Message], content: str, *, source: str) -> None:
    """A message from the harness (or the user) to the model, logged so a resume sees it."""
    messages.append({"role": "user", "content": content})
    agent.events.emit("user_message", content=content, source=source)


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


def _limit_if_spent(agent: Agent) -> Outcome | None:
    if agent.budget.cancelled():
        return Aborted("cancelled")
    left = agent.budget.tokens_left()
    if left is not None and left <= 0:
        return LimitHit(
            "tokens", f"the token budget is spent ({agent.budget.used} used by this agent)"
        )
    seconds = agent.budget.seconds_left()
    if seconds is not None and seconds <= 0:
        return LimitHit("time", "the wall-clock limit passed")
    return None


def _call_model(
    agent: Agent,
    messages: list[Message],
    schemas: list[dict[str, Any]],
    step: int,
    *,
    tools_off: bool = False,
    require_tool: bool = False,
    aside: bool = False,
) -> AssistantTurn:
    """One model call, logged whole. An `aside` is a call outside the conversation (a
    prompt of its own): its size is not the conversation's, and a resume skips it."""
    agent.events.emit("turn_start", step=step)
    started = time.monotonic()
    turn = agent.model.complete(
        messages,
        schemas,
        on_text=lambda text: agent.events.emit("text_delta", text=text, step=step),
        on_retry=lambda attempt, error, wait: agent.events.emit(
            "llm_retry", step=step, attempt=attempt, error=error, wait_s=round(wait, 3)
        ),
        timeout=agent.budget.seconds_left(),
        cancelled=agent.budget.cancelled,
        tools_off=tools_off,
        require_tool=require_tool,
    )
    agent.budget.spend(turn.usage.total)
    if agent.context is not None and not aside:
        agent.context.observe(turn.usage.prompt_tokens, messages)
    agent.events.emit(
        "llm_call",
        step=step,
        model=turn.model or agent.model.name,
        prompt_tokens=turn.usage.prompt_tokens,
        cached_tokens=turn.usage.cached_tokens,
        completion_tokens=turn.usage.completion_tokens,
        total_tokens=turn.usage.total,
        usage_reported=turn.usage.reported,
        elapsed_s=round(time.monotonic() - started, 4),
        attempt=turn.attempt,
        finish_reason=turn.finish_reason,
        tool_calls=len(turn.tool_calls),
        # The whole turn, so a run can be read back and resumed from its log alone.
        text=turn.text,
        calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in turn.tool_calls],
        **({"aside": True} if aside else {}),
    )
    return turn


def _run_batch(
    agent: Agent, turn: AssistantTurn, step: int, guard: RepetitionGuard
) -> list[ToolResult]:
    """Results in call order. Calls that may overlap go to the pool together; the others
    run here one after another. The batch stops early on a limit or a repetition stop."""
    pending: list[Future[ToolResult] | ToolResult] = []
    seen: set[tuple[str, str]] = set()
    for call in turn.tool_calls:
        if guard.stop or _limit_if_spent(agent):
            break
        arguments = executor.parse_arguments(call.arguments)
        key = _same_call_key(call, arguments)
        # A copy of a call in the same reply is not run, and not counted as a repetition.
        refusal = _DUPLICATE if key in seen else guard.check(call.name, key)
        seen.add(key)
        if refusal is None and agent.pool is not None and _may_overlap(agent, call, arguments):
            pending.append(agent.pool.submit(_run_tool, agent, call, arguments, step, None))
        else:
            pending.append(_run_tool(agent, call, arguments, step, refusal))
    return [p.result() if isinstance(p, Future) else p for p in pending]


_DUPLICATE = ToolResult(
    output="not run: the same call as an earlier one in this reply; its result is above",
    summary="duplicate in the batch",
    is_error=True,
)


def _same_call_key(call: ToolCall, arguments: dict[str, Any] | str) -> tuple[str, str]:
    """What makes two calls the same: the tool and its arguments, key order aside."""
    same = json.dumps(arguments, sort_keys=True) if isinstance(arguments, dict) else call.arguments
    return call.name, same


def _may_overlap(agent: Agent, call: ToolCall, arguments: dict[str, Any] | str) -> bool:
    tool = agent.tools.get(call.name)
    if tool is None or tool.overlaps is None or isinstance(arguments, str):
        return False
    try:
        return bool(tool.overlaps(tool.args.model_validate(arguments)))
    except ValueError:  # bad arguments: run it in order, the executor reports the error
        return False


def _run_tool(
    agent: Agent,
    call: ToolCall,
    args: dict[str, Any] | str,
    step: int,
    refusal: ToolResult | None,
    *,
    from_block: bool = False,
) -> ToolResult:
    tool = agent.tools.get(call.name)
    label = tool.label(args) if tool is not None and isinstance(args, dict) else ""
    agent.events.emit("tool_start", step=step, name=call.name, label=label)
    started = time.monotonic()
    if refusal is None and agent.edits is not None:
        refusal = agent.edits.before(call.name, args)
    result = refusal or executor.execute(
        call, args, agent.tools, agent.sandbox, agent.budget, agent.max_output_chars
    )
    if agent.edits is not None and refusal is None:
        result = executor.fit(agent.edits.after(call.name, args, result), agent.max_output_chars)
    agent.events.emit(
        "tool_call",
        step=step,
        name=call.name,
        tool_call_id=call.id,
        args=args if isinstance(args, dict) else call.arguments,
        label=label,
        is_error=result.is_error,
        elapsed_s=round(time.monotonic() - started, 4),
        summary=result.summary,
        result_preview=result.output[:200],
        result_chars=len(result.output),
        content=result.output,
        sandbox=agent.sandbox.name,
        **({"from_block": True} if from_block else {}),
        **({"container": agent.sandbox.container_id} if agent.sandbox.container_id else {}),
        **({"facts": result.facts} if result.facts else {}),
    )
    return result


def _answer_unanswered(messages: list[Message], reason: str) -> None:
    """Every tool call gets a result, even when the run stopped mid-batch, so the
    conversation stays valid for a resume or another turn."""
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    for message in reversed(messages):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        for call in message["tool_calls"]:
            if call["id"] not in answered:
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": f"not run: {reason}"}
                )
        break
