"""The view the loop gives an agent's aids (workers/hooks.py): the agent seen from the
side, through what its run may do, never the agent itself."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from workers import calls, executor
from workers.agent import Agent, AgentResult, first_task, tell
from workers.changes.tracker import ChangeTracker
from workers.check.choose import Check, named_command
from workers.facts import Facts
from workers.guards.editing import EditGuard
from workers.guards.repetition import RepetitionGuard
from workers.hooks import Checkpoint, looked
from workers.log.schema import Event
from workers.model import AssistantTurn, Message, ModelError, ToolCall, written_call
from workers.stepping import SKIPPED
from workers.tools.base import ToolResult


class AgentView:
    def __init__(
        self,
        agent: Agent,
        result: AgentResult,
        guard: RepetitionGuard,
        schemas: list[dict[str, Any]],
    ) -> None:
        self._agent, self._result, self._guard = agent, result, guard
        self._schemas = schemas
        """The tools offered in the conversation, so an extra reply keeps its cached prefix."""
        self.step = 0

    @property
    def task(self) -> str:
        return first_task(self._result.messages)

    @property
    def latest_request(self) -> str:
        messages = self._result.messages
        return str(messages[-1]["content"]) if messages and messages[-1]["role"] == "user" else ""

    @property
    def facts(self) -> Sequence[Facts]:
        return tuple(self._result.facts)

    @property
    def looked(self) -> bool:
        return looked(self._result.messages)

    @property
    def edits(self) -> EditGuard | None:
        return self._agent.edits

    @property
    def changes(self) -> ChangeTracker | None:
        return self._agent.changes

    @property
    def room_for_files(self) -> int:
        return self._agent.room_for_files()

    @property
    def test_runners(self) -> tuple[str, ...]:
        return self._agent.edits.test_runners if self._agent.edits is not None else ()

    @property
    def check_command(self) -> str | None:
        gate = self._agent.gate
        if gate is not None and gate.checker is not None:
            chosen = gate.checker.choose(gate.check_task or self.task)
            # The project's own plain pytest run is the container's: on the host, its
            # `python3` may well have no pytest.
            if isinstance(chosen, Check) and (
                chosen.source != "project" or self._agent.sandbox.name == "docker"
            ):
                return chosen.command
        return named_command(self.task, self.test_runners)

    def spent(self) -> bool:
        return calls.limit_if_spent(self._agent) is not None

    def tell(self, content: str, *, source: str) -> None:
        tell(self._agent, self._result.messages, content, source=source)

    def ask_aside(
        self,
        prompt: str,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: tuple[str, ...] = (),
    ) -> AssistantTurn:
        asked: list[Message] = [{"role": "user", "content": prompt}]
        turn = calls.call_model(
            self._agent,
            asked,
            [],
            self.step,
            tools_off=True,
            aside=True,
            temperature=temperature,
            max_tokens=max_tokens,
            stop=stop,
        )
        self._result.tokens += turn.usage.total
        return turn

    def answer_with_tools_off(self, unanswered: str) -> str:
        agent, messages = self._agent, self._result.messages
        try:
            turn = calls.call_model(agent, messages, self._schemas, self.step, tools_off=True)
        except ModelError:
            return ""
        self._result.tokens += turn.usage.total
        messages.append(turn.as_message())
        calls.answer_unanswered(messages, unanswered)
        return "" if turn.tool_calls or written_call(turn.text, agent.tools) else turn.text

    def run(
        self,
        call: ToolCall,
        arguments: dict[str, Any],
        *,
        checked: bool = True,
        from_block: bool = False,
    ) -> ToolResult:
        agent = self._agent
        # In step mode an aid's call is asked about as the model's are: a fan-out made for
        # the agent starts no worker unasked.
        [decision] = calls.decide(agent, [call])
        given: dict[str, Any] | str = arguments
        if decision.arguments is not None:
            call = dataclasses.replace(call, arguments=decision.arguments)
            given = executor.parse_arguments(call.arguments)
        refusal = (
            self._guard.check(call.name, calls.same_call_key(call, given)) if checked else None
        )
        if decision.action == "skip":
            refusal = SKIPPED
        # A call that may overlap (workers of a fan-out) starts as the agent's would.
        begun = calls.begin_overlapping(agent, call, given, self.step) if not refusal else None
        if begun is not None:
            (result,) = calls.wait_for_all(agent, [begun])
        else:
            result = calls.run_tool(agent, call, given, self.step, refusal, from_block=from_block)
        self._result.tool_calls += 1
        self._result.facts.append(result.facts)
        if checked:
            self._guard.observe(call, result)
        return result

    def read_in_sandbox(self, path: str, *, tool: str = "read_file") -> ToolResult:
        agent = self._agent
        arguments = {"path": path}
        call = ToolCall(id="attach", name=tool, arguments=json.dumps(arguments))
        return executor.execute(
            call, arguments, agent.tools, agent.sandbox, agent.budget, agent.max_output_chars
        )

    def emit(self, event: Event) -> None:
        self._agent.events.emit(event)

    def reply_was_bad(self) -> None:
        self._agent.replies.bad()

    def checkpoint(self) -> Checkpoint:
        edits = self._agent.edits
        return Checkpoint(
            facts=len(self._result.facts),
            last_failure=edits.last_failure if edits else "",
            untested_edit=edits.untested_edit if edits else False,
        )

    def restore(self, checkpoint: Checkpoint) -> None:
        del self._result.facts[checkpoint.facts :]
        if (edits := self._agent.edits) is not None:
            edits.last_failure, edits.untested_edit = (
                checkpoint.last_failure,
                checkpoint.untested_edit,
            )
