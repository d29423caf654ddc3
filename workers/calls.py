"""One step's traffic: the model call, logged whole, and the tool calls of its reply,
run in order or side by side, each logged with what it taught the harness."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from workers import executor, numbered
from workers.agent import Agent, first_task
from workers.guard_hooks import ModelAsk, PendingCall
from workers.limits import least
from workers.log.schema import LlmCall, LlmRetry, TextDelta, ToolCalled, ToolStart, TurnStart
from workers.model import (
    AssistantTurn,
    CallOptions,
    Message,
    ModelError,
    ModelErrorKind,
    ToolCall,
    Usage,
)
from workers.observed import call_ends, call_starts, executed
from workers.outcome import Aborted, LimitHit, Outcome
from workers.pace import new_tokens
from workers.stepping import SKIPPED, Decision, edited_note
from workers.tools.base import ToolResult


def limit_if_spent(agent: Agent) -> Outcome | None:
    """Why the agent must stop now (cancelled, or out of tokens or time), or None."""
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
    dollars = agent.budget.cost_left()
    if dollars is not None and dollars <= 0:
        spent = agent.budget.spent_dollars()
        return LimitHit("cost", f"the cost budget is spent (${spent:.4f} used, --max-cost)")
    return None


def _answer_begins(agent: Agent, messages: list[Message]) -> str:
    """How an answer asked for with tools off begins: a reader's task of numbered
    questions, at its first question's number (an editor's answer may begin with a file;
    numbered rules or steps are not asked)."""
    if not all(tool.read_only for tool in agent.tools.values()):
        return ""
    asked = numbered.unanswered(first_task(messages), "")  # numbered questions, not steps
    return f"{asked[0]}. " if asked else ""


def _takes_stop(agent: Agent) -> bool:
    """Whether the agent's model is sent stop texts: a client that says so (`stop_texts`:
    an endpoint that takes them; a scripted model, which records them)."""
    return bool(getattr(agent.model, "stop_texts", False))


def call_model(
    agent: Agent,
    messages: list[Message],
    schemas: list[dict[str, Any]],
    step: int,
    *,
    tools_off: bool = False,
    require_tool: bool = False,
    aside: bool = False,
    temperature: float | None = None,
    max_tokens: int | None = None,
    stop: tuple[str, ...] = (),
    seconds: float | None = None,
) -> AssistantTurn:
    """One model call, logged whole. An `aside` is a call outside the conversation (a
    prompt of its own): its size is not the conversation's, and a resume skips it.
    `temperature` samples this call alone at that temperature; `seconds` bounds it
    below the agent's own time left. The guards see it before and after
    (workers/guard_hooks.py)."""
    ask = ModelAsk(messages, step, aside=aside, stop=stop)
    agent.guards.before_model(ask)
    agent.events.emit(TurnStart(step=step))
    started = time.monotonic()
    streamed: list[str] = []

    def on_text(text: str) -> None:
        streamed.append(text)
        agent.events.emit(TextDelta(text=text, step=step))

    if tools_off and not aside and (left := least(agent.budget.seconds_left(), seconds)):
        # An answer the deadline cuts gives nothing: one cut at what the time left can
        # write still says what it found (the demo's explorer, paused with 78 s left,
        # wrote for 78 s and ended out of time).
        fits = agent.budget.pace(agent.model.name).reply_tokens_within(left, new_tokens(messages))
        max_tokens = least(max_tokens, fits)
    options = CallOptions(
        on_text=on_text,
        on_retry=lambda attempt, error, wait: agent.events.emit(
            LlmRetry(step=step, attempt=attempt, error=error, wait_s=round(wait, 3))
        ),
        timeout=least(agent.budget.seconds_left(), seconds),
        cancelled=agent.budget.cancelled,
        tools_off=tools_off,
        require_tool=require_tool,
        temperature=temperature,
        vary=ask.vary,
        max_tokens=max_tokens,
        stop=ask.stop if _takes_stop(agent) else (),
        answer_begins=_answer_begins(agent, messages) if tools_off and not aside else "",
    )
    try:
        turn = agent.model.complete(messages, schemas, options)
        if turn.runaway and not turn.text.strip() and not turn.tool_calls:
            # Nothing came before the loop: a reply the server could not read, in effect.
            raise ModelError("malformed_output", f"the reply ran into a loop: {turn.runaway}")
    except ModelError as error:
        if error.kind == "malformed_output":
            agent.guards.after_model(ask, None)
        error.partial = "".join(streamed)
        raise
    agent.guards.after_model(ask, turn)
    agent.budget.spend(turn.usage.total)
    usage = turn.usage
    agent.budget.spend_cost(
        turn.model or agent.model.name,
        usage.prompt_tokens,
        usage.cached_tokens or 0,
        usage.completion_tokens,
    )
    if turn.attempt == 1:  # a retried call's time holds its waits
        seconds = time.monotonic() - started
        pace = agent.budget.pace(agent.model.name)
        pace.took(seconds, *_sizes(usage), aside=aside, server=usage.server)
    agent.events.emit(
        LlmCall(
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
            text=turn.text,
            calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in turn.tool_calls],
            aside=True if aside else None,
            temperature=temperature,
            max_tokens=max_tokens,
            stop=list(options.stop) or None,
            reasoning_tokens=turn.usage.reasoning_tokens,
            reasoning=list(turn.reasoning) or None,
            varied=options.vary or None,
            same_as=ask.same_as,
            runaway=turn.runaway or None,
            server_prompt_s=round(usage.server.prompt_seconds, 3) if usage.server else None,
            server_reply_s=round(usage.server.reply_seconds, 3) if usage.server else None,
        )
    )
    if turn.finish_reason == "length" and not turn.text.strip() and not turn.tool_calls:
        # Nothing to act on and nothing to answer with: asking the same again spends the
        # same; the run ends at the limit, saying where the tokens went.
        spent = turn.usage.completion_tokens
        went = (
            f", {turn.usage.reasoning_tokens} of them reasoning"
            if turn.usage.reasoning_tokens
            else ""
        )
        raise ModelError(
            OUTPUT_LIMIT,
            f"the reply was cut off at the output limit with nothing in it ({spent} tokens{went})",
        )
    return turn


OUTPUT_LIMIT: ModelErrorKind = "output_limit"
"""The ModelError kind of a reply the output limit cut off before it said anything."""


# Calls one reply may have run: far more than any real plan needs in one turn, few enough
# that a runaway reply cannot occupy the run. The rest are answered, not run.
MAX_CALLS_PER_REPLY = 64
TOO_MANY = ToolResult(
    output=f"not run: a reply may make at most {MAX_CALLS_PER_REPLY} calls; make this one again "
    "in your next reply if it is still needed",
    summary="over the calls cap",
    is_error=True,
)


def run_batch(agent: Agent, turn: AssistantTurn, step: int) -> list[ToolResult]:
    """Results in call order. Calls that may overlap start together and are waited for
    at the end; the others run here one after another. The batch stops early on a limit
    or when a guard stopped the run."""
    pending: list[Callable[[], ToolResult] | ToolResult] = []
    seen: set[tuple[str, str]] = set()
    decisions = decide(agent, turn.tool_calls)
    try:
        for number, (call, decision) in enumerate(zip(turn.tool_calls, decisions, strict=True)):
            if agent.guards.stopped() or limit_if_spent(agent):
                break
            if number >= MAX_CALLS_PER_REPLY:  # its llm_call line lists it; one answer each
                over = PendingCall(call, call.arguments, (call.name, call.arguments), refused=True)
                pending.append(agent.guards.after_call(over, TOO_MANY))
                continue
            if decision.arguments is not None:
                call = dataclasses.replace(call, arguments=decision.arguments)
            arguments = executor.parse_arguments(call.arguments)
            if meant := executor.as_meant(call, arguments, agent.tools):
                call, said = meant
            key = same_call_key(call, arguments)
            # A copy of a call in the same reply is not run, and not counted as a repetition.
            copy = key in seen
            asked = PendingCall(call, arguments, key, counted=not copy)
            refusal = DUPLICATE if copy else agent.guards.before_call(asked)
            if decision.action == "skip":
                refusal = SKIPPED  # and not `seen`: the same call, run, is no duplicate
            else:
                seen.add(key)
            begun = begin_overlapping(agent, asked, step) if refusal is None else None
            done = begun or run_tool(agent, asked, step, refusal)
            note = edited_note(call.arguments) if decision.arguments is not None else ""
            if note := note + (said if meant else ""):
                done = _noted(done, note)
            pending.append(done)
    except KeyboardInterrupt:
        agent.budget.cancel()  # the calls already started end now, and log their ends
        wait_for_all(agent, pending)
        raise
    return wait_for_all(agent, pending)


def _noted(
    done: Callable[[], ToolResult] | ToolResult, note: str
) -> Callable[[], ToolResult] | ToolResult:
    """A result, or what waits for one, with a line of gaffer's before it."""
    if isinstance(done, ToolResult):
        return dataclasses.replace(done, output=note + done.output)
    return lambda: _noted(done(), note)  # type: ignore[return-value]


def decide(agent: Agent, calls: Sequence[ToolCall]) -> list[Decision]:
    """Step mode's decisions (StoppedByUser to stop); every call runs as asked without it."""
    if agent.stepper is None or not calls:
        return [Decision("run")] * len(calls)
    agent_id = str(agent.events.context.get("agent_id", "agent"))
    decisions = agent.stepper.decide(agent_id, list(calls))
    # Whoever answers must answer for every call; otherwise nothing runs unasked.
    return decisions if len(decisions) == len(calls) else [Decision("skip")] * len(calls)


def wait_for_all(
    agent: Agent, pending: list[Callable[[], ToolResult] | ToolResult]
) -> list[ToolResult]:
    """Every started call's result, even after Ctrl-C: it cancels them all, and each
    still ends (and logs its end) before the interrupt goes on up."""
    results: list[ToolResult] = []
    interrupted = False
    for item in pending:
        while True:
            try:
                results.append(item if isinstance(item, ToolResult) else item())
                break
            except KeyboardInterrupt:
                agent.budget.cancel()
                interrupted = True
    if interrupted:
        raise KeyboardInterrupt
    return results


DUPLICATE = ToolResult(
    output="not run: the same call as an earlier one in this reply; its result is above",
    summary="duplicate in the batch",
    is_error=True,
)


def same_call_key(call: ToolCall, arguments: dict[str, Any] | str) -> tuple[str, str]:
    """What makes two calls the same: the tool and its arguments, key order aside."""
    same = json.dumps(arguments, sort_keys=True) if isinstance(arguments, dict) else call.arguments
    return call.name, same


def begin_overlapping(
    agent: Agent, asked: PendingCall, step: int
) -> Callable[[], ToolResult] | None:
    """Start a call that may overlap the rest of its batch; what waits for its result,
    or None when it runs in order."""
    call, arguments = asked.call, asked.arguments
    tool = agent.tools.get(call.name)
    if tool is None or tool.begin is None or isinstance(arguments, str):
        return None
    try:
        args = tool.args.model_validate(arguments)
    except ValueError:  # bad arguments: run it in order, the executor reports the error
        return None
    label = tool.label(arguments)
    started = time.monotonic()
    call_starts(agent, tool)
    try:
        wait = tool.begin(args)
    except BaseException:
        call_ends(agent, tool)
        raise
    if wait is None:
        call_ends(agent, tool)
        return None
    agent.events.emit(_started(call, arguments, step, label))

    def finish() -> ToolResult:
        try:
            done = wait()
        finally:
            call_ends(agent, tool)
        asked.took = time.monotonic() - started
        result = executor.fit(agent.guards.after_call(asked, done), agent.max_output_chars)
        log_tool_call(agent, call, arguments, step, label, started, result)
        return result

    return finish


def _started(call: ToolCall, args: object, step: int, label: str) -> ToolStart:
    """A call as it starts, for the terminal and a stream-json reader."""
    given = args if isinstance(args, dict) else None
    return ToolStart(step=step, name=call.name, label=label, tool_call_id=call.id, args=given)


def run_tool(
    agent: Agent,
    asked: PendingCall,
    step: int,
    refusal: ToolResult | None,
    *,
    from_block: bool = False,
) -> ToolResult:
    """The call run in order, or its `refusal` given; what the guards add to its result."""
    call, args = asked.call, asked.arguments
    tool = agent.tools.get(call.name)
    label = tool.label(args) if tool is not None and isinstance(args, dict) else ""
    agent.events.emit(_started(call, args, step, label))
    started = time.monotonic()
    asked.refused = refusal is not None
    result = executed(agent, call, args, tool) if refusal is None else refusal
    asked.took = time.monotonic() - started
    result = executor.fit(agent.guards.after_call(asked, result), agent.max_output_chars)
    log_tool_call(agent, call, args, step, label, started, result, from_block=from_block)
    return result


def log_tool_call(
    agent: Agent,
    call: ToolCall,
    args: dict[str, Any] | str,
    step: int,
    label: str,
    started: float,
    result: ToolResult,
    *,
    from_block: bool = False,
) -> None:
    agent.events.emit(
        ToolCalled(
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
            from_block=True if from_block else None,
            container=agent.sandbox.container_id or None,
            facts=result.facts.as_json() or None,
        )
    )


def _sizes(usage: Usage) -> tuple[int | None, int | None]:
    """A call's new prompt tokens and reply tokens, as far as the endpoint said them."""
    if not usage.reported:
        return None, None
    new = None if usage.cached_tokens is None else usage.prompt_tokens - usage.cached_tokens
    return new, usage.completion_tokens
