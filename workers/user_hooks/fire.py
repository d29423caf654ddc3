"""Where the hooks fire: before and after each agent's tool calls (a guard every agent
gets), when an agent starts and ends and when the session ends (read off the log's own
events, so every agent of the tree is seen with its id, parent and profile), before a
user's message reaches the top agent, and when gaffer waits for the user."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any

from workers.changes.tracker import ChangeTracker
from workers.guard_hooks import Guard, PendingCall
from workers.limits import Budget
from workers.log.events import Emitter, Record
from workers.log.schema import HookRan
from workers.permissions.gate import Ask, Asker
from workers.sandbox import Sandbox
from workers.tools.base import ToolResult
from workers.user_hooks import runner
from workers.user_hooks.config import Hook, HookSet, Moment
from workers.user_hooks.runner import HookRun

_IDENTITY = ("session_id", "agent_id", "parent_id", "profile")


class Hooks:
    """The run's hooks, and what every payload says of the run."""

    def __init__(self, hooks: HookSet, workspace: Path, log_path: Path | None = None) -> None:
        self.hooks = hooks
        self.workspace = workspace
        self.log_path = log_path

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def payload(self, moment: Moment, identity: Record, **fields: Any) -> dict[str, Any]:
        base = {"event": moment, **{k: identity.get(k) for k in _IDENTITY}}
        base.update(cwd=str(self.workspace), log_path=str(self.log_path) if self.log_path else None)
        return {**base, **fields}

    def fire(
        self, moment: Moment, events: Emitter, tool: str | None = None, **fields: Any
    ) -> list[HookRun]:
        """Every host hook of this moment, in order; each run is logged."""
        runs = []
        for hook in self.hooks.at(moment, tool):
            payload = self.payload(moment, events.context, tool=tool, **fields)
            run = runner.on_host(hook, payload, self.workspace)
            logged(events, hook, run, "host", tool)
            runs.append(run)
        return runs

    def on_record(self, events: Emitter) -> Any:
        """A log subscriber that fires agent_start, agent_end and session_end hooks."""

        def subscriber(record: Record) -> None:
            moment = {
                "agent_start": "agent_start",
                "agent_end": "agent_end",
                "session_end": "session_end",
            }.get(record["event"])
            if moment is None or not self.hooks.at(moment):  # type: ignore[arg-type]
                return
            identity = {k: record.get(k) for k in _IDENTITY}
            keys = ("status", "reason", "answer", "exit_code", "model", "tools", "sandbox", "steps")
            outcome = {k: record[k] for k in keys if k in record}
            self.fire(moment, events.bind(**identity), **outcome)  # type: ignore[arg-type]

        return subscriber

    def notifying(self, asker: Asker | None, events: Emitter) -> Asker | None:
        """`asker`, firing notification hooks as gaffer starts to wait for the user."""
        if asker is None or not self.hooks.at("notification"):
            return asker

        def ask(question: Ask) -> bool:
            message = f"{question.agent} asks to {question.tool}: {question.what}"[:2000]
            self.fire("notification", events, message=message)
            return asker(question)

        return ask


def logged(events: Emitter, hook: Hook, run: HookRun, where: str, tool: str | None) -> None:
    decision = "failed" if run.failed else "blocked" if run.blocks else "ok"
    message = run.trouble() if run.failed else (run.said() or None)
    events.emit(
        HookRan(
            hook=hook.moment,
            source=hook.source,
            exit_code=run.exit_code,
            elapsed_s=run.elapsed_s,
            decision=decision,
            where=where,
            tool=tool,
            message=message,
        )
    )


class HookGuard(Guard):
    """An agent's pre_tool and post_tool hooks: asked after the permissions, so a call
    they refuse runs no hook."""

    def __init__(
        self,
        hooks: Hooks,
        events: Emitter,
        sandbox: Sandbox,
        budget: Budget,
        changes: ChangeTracker | None,
    ) -> None:
        self.hooks = hooks
        self.events = events
        self.sandbox = sandbox
        self.budget = budget
        self.changes = changes

    def before_call(self, call: PendingCall) -> ToolResult | None:
        if not isinstance(call.arguments, dict):
            return None
        for run in self.hooks.fire(
            "pre_tool", self.events, call.name, arguments=call.arguments, sandbox=self.sandbox.name
        ):
            if run.blocks:
                said = run.said() or "no reason given"
                line = f"not run: blocked by a pre_tool hook ({said})"
                return ToolResult(output=line, summary=line, is_error=True)
        return None

    def after_call(self, call: PendingCall, result: ToolResult) -> ToolResult:
        if call.refused or not isinstance(call.arguments, dict):
            return result
        notes = []
        moved = False
        for hook in self.hooks.hooks.at("post_tool", call.name):
            payload = self.hooks.payload(
                "post_tool",
                self.events.context,
                tool=call.name,
                arguments=call.arguments,
                result={
                    "output": result.output[: runner.MAX_OUTPUT_BYTES],
                    "is_error": result.is_error,
                },
                sandbox=self.sandbox.name,
            )
            if hook.in_sandbox and self.sandbox.name != "host":
                run, where = self._in_sandbox(hook, payload), "container"
            else:
                cwd = self.hooks.workspace if hook.in_sandbox else None
                run, where = runner.on_host(hook, payload, self.hooks.workspace, cwd), "host"
            moved = moved or hook.in_sandbox
            logged(self.events, hook, run, where, call.name)
            if run.blocks and run.said():
                notes.append(f"[post_tool hook, {hook.source}] {run.said()}")
        if moved and self.changes is not None:
            with contextlib.suppress(OSError):  # what a formatter changed is the agent's
                self.changes.look()
        if not notes:
            return result
        return dataclasses.replace(result, output=result.output + "\n\n" + "\n".join(notes))

    def _in_sandbox(self, hook: Hook, payload: dict[str, Any]) -> HookRun:
        from workers.tools import BUILTIN_TOOLS

        shell = BUILTIN_TOOLS["run_shell"]
        args = shell.args.model_validate(
            {"command": runner.in_sandbox_script(hook, payload), "timeout": int(hook.timeout)}
        )
        try:
            done = self.sandbox.run(shell, args, self.budget, runner.MAX_OUTPUT_BYTES)
        except Exception as error:  # the sandbox's fault is said, and the run goes on
            return HookRun(None, problem=f"could not run in the sandbox: {error}")
        code = done.facts.exit_code
        if code is None:
            return HookRun(None, stdout=done.output, problem=f"did not finish: {done.summary}")
        return HookRun(code, stdout=done.output, stderr=done.output if code else "")
