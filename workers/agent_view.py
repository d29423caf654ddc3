"""The view the loop gives an agent's aids (workers/hooks.py): the agent seen from the
side, through what its run may do, never the agent itself."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from workers import calls, executor
from workers.agent import Agent, AgentResult, answer_unanswered, first_task, tell
from workers.changes.change_sets import Change, compare
from workers.changes.snapshots import Tree
from workers.changes.tracker import ChangeTracker
from workers.changes.undo import undo
from workers.check.choose import Check, named_command
from workers.facts import Facts
from workers.guard_hooks import PendingCall
from workers.guards.editing import EditGuard
from workers.guards.replies import ReplyGuard
from workers.guards.task_rules import KeptTests
from workers.guards.verification import Gate
from workers.hooks import Checkpoint, FilesSeen, looked
from workers.log.schema import Event
from workers.model import AssistantTurn, Message, ModelError, ToolCall, written_call
from workers.permissions.gate import PermissionGuard
from workers.stepping import SKIPPED
from workers.tools.base import ToolResult


class FromGuards:
    """What a view answers from the agent's edit guard and change tracker (either may be
    None: an agent that edits nothing, or whose changes are not tracked)."""

    _edits: EditGuard | None
    _changes: ChangeTracker | None

    def files_seen(self) -> FilesSeen | None:
        return self._edits

    @property
    def last_failure(self) -> str:
        return self._edits.last_failure if self._edits else ""

    @property
    def untested_edit(self) -> bool:
        return self._edits is not None and self._edits.untested_edit

    @property
    def passing(self) -> bool:
        return self._edits is not None and self._edits.passing

    def deadline(self, command: str) -> int | None:
        return self._edits.deadline(command) if self._edits else None

    def full_output(self, result: ToolResult) -> str:
        return self._edits.full_output(result) if self._edits else result.output

    def saw(self, path: str, text: str = "") -> None:
        if self._edits is not None:
            self._edits.after("read_file", {"path": path}, ToolResult(output=text))

    def keep_tests(self, kept: KeptTests | None) -> None:
        if self._edits is not None:
            self._edits.kept = kept

    @property
    def keeps_tests(self) -> bool:
        return self._edits is not None and self._edits.kept is not None

    @property
    def tracks_changes(self) -> bool:
        return self._changes is not None

    def original(self, path: str) -> bytes | None:
        return self._changes.original(path) if self._changes else None

    def mark(self) -> Tree:
        return self._tracker().mark()

    def since_start(self) -> list[Change]:
        return self._tracker().since_start()

    def steps_taken(self) -> int:
        return self._tracker().steps_taken()

    def changes_since(self, steps: int) -> list[Change]:
        return self._tracker().changes_since(steps)

    def changed_since(self, tree: Tree) -> list[Change]:
        return compare(tree, self._tracker().store.scan())

    def undo(self, changes: Sequence[Change]) -> None:
        undo(self._tracker().store, list(changes))

    def look(self) -> None:
        self._tracker().look()

    def _tracker(self) -> ChangeTracker:
        if self._changes is None:  # an aid that takes changes back is given only with one
            raise RuntimeError("this agent's changes are not tracked")
        return self._changes


class AgentView(FromGuards):
    def __init__(self, agent: Agent, result: AgentResult, schemas: list[dict[str, Any]]) -> None:
        self._agent, self._result = agent, result
        self._edits = agent.guards.find(EditGuard)
        self._changes = agent.changes
        self._gate = agent.guards.find(Gate)
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
    def room_for_files(self) -> int:
        return self._agent.room_for_files()

    @property
    def test_runners(self) -> tuple[str, ...]:
        return self._agent.test_runners

    @property
    def check_command(self) -> str | None:
        gate = self._gate
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

    @property
    def seconds_left(self) -> float | None:
        return self._agent.budget.seconds_left()

    def tell(self, content: str, *, source: str) -> None:
        tell(self._agent, self._result.messages, content, source=source)

    def ask_aside(
        self,
        prompt: str,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: tuple[str, ...] = (),
        seconds: float | None = None,
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
            seconds=seconds,
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
        answer_unanswered(messages, unanswered)
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
        asked = PendingCall(call, given, calls.same_call_key(call, given), counted=checked)
        refusal = agent.guards.before_call(asked)
        if decision.action == "skip":
            refusal = SKIPPED
        # A call that may overlap (workers of a fan-out) starts as the agent's would.
        begun = calls.begin_overlapping(agent, asked, self.step) if not refusal else None
        if begun is not None:
            (result,) = calls.wait_for_all(agent, [begun])
        else:
            result = calls.run_tool(agent, asked, self.step, refusal, from_block=from_block)
        self._result.tool_calls += 1
        self._result.facts.append(result.facts)
        return result

    def read_in_sandbox(self, path: str, *, tool: str = "read_file") -> ToolResult:
        agent = self._agent
        arguments = {"path": path}
        permissions = agent.guards.find(PermissionGuard)  # a file the rules keep back stays
        if permissions is not None and (refusal := permissions.refuses_unasked(tool, arguments)):
            return ToolResult(output=refusal, summary=refusal, is_error=True)
        call = ToolCall(id="attach", name=tool, arguments=json.dumps(arguments))
        return executor.execute(
            call, arguments, agent.tools, agent.sandbox, agent.budget, agent.max_output_chars
        )

    def emit(self, event: Event) -> None:
        self._agent.events.emit(event)

    def reply_was_bad(self) -> None:
        if (replies := self._agent.guards.find(ReplyGuard)) is not None:
            replies.bad()

    def checkpoint(self) -> Checkpoint:
        edits = self._edits
        return Checkpoint(
            facts=len(self._result.facts),
            last_failure=edits.last_failure if edits else "",
            untested_edit=edits.untested_edit if edits else False,
        )

    def restore(self, checkpoint: Checkpoint) -> None:
        del self._result.facts[checkpoint.facts :]
        if (edits := self._edits) is not None:
            edits.last_failure, edits.untested_edit = (
                checkpoint.last_failure,
                checkpoint.untested_edit,
            )
