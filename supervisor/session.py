"""One run of gaffer: its id, its log, its team of agents, and the totals at the end."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import cast

from supervisor.costs import pricer
from supervisor.delegation import Team
from supervisor.run_check import could_change_files
from supervisor.run_end import decide
from supervisor.run_plan import RunPlan
from workers.agent import AgentResult, first_task, tell
from workers.aids.task_rules import read_only_tests
from workers.changes.snapshots import Store
from workers.changes.tracker import ChangeTracker
from workers.changes.worktrees import reap_worktrees
from workers.check.checker import Checker
from workers.check.report import CheckRun
from workers.guards.context import ContextKeeper, window_for
from workers.limits import Budget
from workers.log.eventlog import JsonlLog
from workers.log.events import Emitter, Recorder, Subscriber
from workers.log.reader import events_of
from workers.log.schema import (
    CheckChosen,
    DelegateStart,
    LlmCall,
    LlmRetry,
    SessionEnd,
    SessionStart,
    ToolCalled,
    UserMessage,
)
from workers.loop import run_agent
from workers.model import Api, Endpoint, Message, Model
from workers.outcome import Aborted, Failed, Finished
from workers.permissions.gate import Permissions
from workers.placement import SandboxFactory
from workers.sandbox import SandboxUnavailable
from workers.sandbox.options import DockerOptions
from workers.user_hooks.config import HookSet
from workers.user_hooks.fire import Hooks

TOP_AGENT_ID = "supervisor"


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def gaffer_version() -> str:
    try:
        return version("gaffer")
    except PackageNotFoundError:
        return "unknown"


@dataclass
class Session:
    workspace: Path
    log_dir: Path
    subscribers: list[Subscriber] = field(default_factory=list)
    session_id: str = field(default_factory=new_session_id)

    def __post_init__(self) -> None:
        self.root = Budget()
        self._turn_budget: Budget | None = None
        self.log = JsonlLog(self.log_dir / f"{self.session_id}.jsonl")
        self.recorder = Recorder()
        self.events = Emitter([self.log, self.recorder, *self.subscribers]).bind(
            session_id=self.session_id
        )

    def discard(self) -> None:
        """Close and remove the log of a session that never started (bad flags, bad profile)."""
        self.log.close()
        if self.log.path.stat().st_size == 0 or not self.recorder.of("session_start"):
            self.log.path.unlink(missing_ok=True)

    def _make_model(
        self, name: str | None, api: Api | None = None, endpoint: Endpoint | None = None
    ) -> Model:
        """The run's model unless named (the top profile's, when it names one)."""
        return self.plan.make_model(name or self.model_name, api, endpoint)

    def paused(self) -> AbstractContextManager[object]:
        """The terminal view held still (the user answers a prompt), when there is one."""
        for subscriber in self.subscribers:
            if callable(pause := getattr(subscriber, "paused", None)):
                return cast(AbstractContextManager[object], pause())
        return contextlib.nullcontext()

    def cancel(self) -> None:
        """Stop what runs now: every agent ends at its next step, running commands are killed."""
        if self._turn_budget is not None:
            self._turn_budget.cancel()
        else:
            self.root.cancel()

    def run(
        self,
        task: str,
        plan: RunPlan,
        *,
        resumed: list[Message] | None = None,
        resumed_from: str | None = None,
        resumed_baseline: str | None = None,
    ) -> AgentResult:
        """One task, start to end: what `gaffer run` does. `resumed_baseline`: the snapshot
        the run it resumes began from (its check puts kept files back to that)."""
        self.start(
            plan,
            task=task,
            resumed=resumed,
            resumed_from=resumed_from,
            resumed_baseline=resumed_baseline,
        )
        try:
            return self.turn(task)
        finally:
            self.close()

    def start(
        self,
        plan: RunPlan,
        *,
        task: str = "",
        resumed: list[Message] | None = None,
        resumed_from: str | None = None,
        resumed_baseline: str | None = None,
    ) -> None:
        self.plan = plan
        self._resumed_baseline = resumed_baseline
        self.top = plan.profiles[plan.top]
        if plan.max_steps is not None:
            limits = self.top.limits.model_copy(update={"max_steps": plan.max_steps})
            self.top = self.top.model_copy(update={"limits": limits})
        self.model_name: str | None = self.top.model
        self._started = time.monotonic()
        self._last: AgentResult | None = None
        self.check: CheckRun | None = None
        """The run's check, run by gaffer at its end (supervisor/run_check.py)."""
        self._turn_budget = None
        self.top_events.emit(
            SessionStart(
                task=task,
                workspace=str(self.workspace),
                model=plan.make_model(self.model_name).name,
                base_url=plan.base_url,
                gaffer_version=gaffer_version(),
                pid=os.getpid(),
                profile=self.top.name,
                max_steps=self.top.limits.max_steps,
                max_seconds=plan.max_seconds,
                max_tokens=plan.max_tokens,
                resumed_from=resumed_from,
            )
        )
        self.root = Budget(
            plan.max_tokens, plan.max_seconds, max_cost=plan.max_cost, price=pricer(plan.prices)
        )
        reap_worktrees(self.workspace)  # isolated editors' copies a killed run left
        if plan.permissions is None:  # no rules: asks go where host commands' went
            plan.permissions = Permissions(asker=lambda ask: plan.approve(ask.what, ask.why))
        self.hooks = Hooks(plan.hooks or HookSet(), self.workspace, self.log.path)
        if self.hooks:
            self.events.subscribe(self.hooks.on_record(self.events))
            asker = self.hooks.notifying(plan.permissions.asker, self.top_events)
            plan.permissions.asker = asker
        self.team = Team(
            workspace=self.workspace,
            plan=plan,
            make_model=self._make_model,
            make_sandbox=SandboxFactory(
                self.workspace,
                run_id=self.session_id,
                events=self.events,
                approve=plan.permissions.host_approver(plan.approve),
                uid=plan.sandbox_uid,
                cluster=plan.cluster,
            ),
            events=self.events,
            store=Store(self.workspace),
            diff_folder=self.log.path.with_suffix(".changes"),
        )
        # The top agent's spec, with the run's step limit if the user set one.
        self.top_spec = dataclasses.replace(self.team.specs[plan.top], profile=self.top)
        self.team.setting = dataclasses.replace(
            self.team.setting,
            checker=self._checker(),
            permissions=plan.permissions,
            hooks=self.hooks or None,
        )
        self.messages: list[Message] = list(resumed or [])
        # The user's own words, never a summary or a model's: their rules hold for every
        # agent of the run (a resumed run's first message is the user's task).
        self.said: list[str] = [first_task(self.messages)] if resumed else []
        model = plan.make_model(self.model_name)
        self.keeper = ContextKeeper(
            window_for(model.name, plan.rules.context_window), rules=self.team.instructions
        )

    @property
    def top_events(self) -> Emitter:
        return self.events.bind(agent_id=TOP_AGENT_ID, profile=self.plan.top)

    def turn(self, text: str) -> AgentResult:
        """The top agent answers one user message, in the conversation so far."""
        budget = self._turn_budget = self.root.child(self.top.limits.as_limits())
        self.check = None
        runs = self.hooks.fire("user_prompt", self.top_events, prompt=text) if self.hooks else []
        if blocked := next((run for run in runs if run.blocks), None):
            why = blocked.said() or "no reason given"
            self._last = AgentResult(
                Failed(f"a user_prompt hook blocked the message: {why}"), self.messages
            )
            return self._last
        if added := "\n\n".join(
            r.stdout.strip() for r in runs if r.exit_code == 0 and r.stdout.strip()
        ):
            text = f"{text}\n\n{added}"  # what the hooks add, as Claude Code's do
        try:
            self.said.append(text)
            said = "\n\n".join(s for s in self.said if s)
            setting = self.team.setting = dataclasses.replace(self.team.setting, user_task=said)
            if setting.checker is not None:  # from the project as the turn finds it
                chosen = setting.checker.choose(said)
                command, source = getattr(chosen, "command", None), getattr(chosen, "source", None)
                baseline = setting.checker.baseline_id
                self.top_events.emit(CheckChosen(chosen.describe(), command, source, baseline))
            kept = read_only_tests(self.top_spec, text, setting)
            with self.team.make_sandbox(self.top_spec, TOP_AGENT_ID, None, kept) as sandbox:
                agent, prompt = self.team.build(
                    self.top_spec, TOP_AGENT_ID, sandbox, budget, depth=0, parent=None, task=text
                )
                # the conversation's window outlives one turn
                agent.guards = agent.guards.replaced(self.keeper)
                if not self.messages or self.messages[0]["role"] != "system":
                    self.messages.insert(0, {"role": "system", "content": prompt})
                tell(agent, self.messages, text, source="user")
                result = run_agent(agent, self.messages)
                self.check = self._check(result, agent.changes, said)
                result = _stamped(result, self.check)
        except SandboxUnavailable as error:
            result = AgentResult(Failed(str(error), kind="sandbox"), self.messages)
        finally:
            self._turn_budget = None
        self._last = result
        return result

    def _check(
        self, result: AgentResult, tracker: ChangeTracker | None, said: str
    ) -> CheckRun | None:
        """The run's check at the end of a turn whose answer came: every `gaffer run`
        that could change files, and a chat's turn that changed some."""
        checker = self.team.setting.checker
        if checker is None or not isinstance(result.outcome, Finished):
            return None
        if not self.plan.task_mode and not (tracker is not None and tracker.since_start()):
            return None  # a chat's turn that changed nothing has nothing new to check
        return checker.run(said, self.top_events)

    def _checker(self) -> Checker | None:
        """The run's check, when it could change files and its answer is judged."""
        if not self.plan.rules.verify or not could_change_files(self.top_spec, self.team.specs):
            return None  # --no-verify: the user asked for no judgement of the answer
        sandboxed = self.top.sandbox == "docker"
        return Checker(
            self.workspace,
            flag=self.plan.check,
            config=self.plan.check_config,
            runners=tuple(self.plan.rules.test_runners),
            options=self.top.docker if sandboxed else DockerOptions(),
            uid=self.plan.sandbox_uid,
            store=self.team.store,
            baseline_id=self._resumed_baseline,
        )

    def tell_model(self, content: str, *, source: str) -> None:
        """Something the model must know before the next turn (the user took its changes
        back): in its conversation, and logged, so a resume knows it too."""
        self.messages.append({"role": "user", "content": content})
        self.top_events.emit(UserMessage(content=content, source=source))

    @property
    def answer_alone(self) -> str | None:
        """The last turn's answer as the agent gave it, without gaffer's verdict beside it."""
        return self._last.answer_alone if self._last else None

    def compact(self) -> bool:
        """Fold older turns now (/compact)."""
        return self.keeper.compact(
            self.messages,
            self._last.facts if self._last else [],
            0,
            reason="manual",
            model=self.plan.make_model(self.model_name),
            budget=self.root.child(self.top.limits.as_limits()),
            events=self.top_events,
        )

    def close(self) -> None:
        try:
            self.team.shutdown()
            self._end()
        finally:
            if self.plan.extensions is not None:
                self.plan.extensions.close()
            if self.plan.cluster is not None:
                self.plan.cluster.shutdown()
            self.log.close()

    def _end(self) -> None:
        outcome = self._last.outcome if self._last else Aborted("no task was given")
        records = self.recorder.records
        llm_calls, tool_calls = events_of(records, LlmCall), events_of(records, ToolCalled)
        end = decide(
            outcome,
            records,
            require_verified=self.plan.require_verified,
            log_failure=self.log.failure,
        )
        self.top_events.emit(
            SessionEnd(
                status=end.status,
                reason=end.reason,
                exit_code=end.exit_code if self.plan.task_mode else None,  # a chat exits 0
                elapsed_s=round(time.monotonic() - self._started, 3),
                steps=self._last.steps if self._last else 0,
                tokens=self.root.used,
                prompt_tokens=sum(call.prompt_tokens for call in llm_calls),
                completion_tokens=sum(call.completion_tokens for call in llm_calls),
                llm_calls=len(llm_calls),
                retries=len(events_of(records, LlmRetry)),
                tool_calls=len(tool_calls),
                tool_errors=sum(1 for call in tool_calls if call.is_error),
                workers=len(events_of(records, DelegateStart)),
            )
        )


def _stamped(result: AgentResult, check: CheckRun | None) -> AgentResult:
    """The answer with the run's check beside it, when the check ran and the gate did not
    stamp it so: an answer that says "I ran the tests, they pass" never goes out without
    gaffer's word."""
    if check is None or check.verdict == "unchecked" or not isinstance(result.outcome, Finished):
        return result  # nothing ran: the last stderr line says why
    answer = result.outcome.answer
    if "\nCheck: " in answer:
        return result
    stamped = f"{answer.rstrip()}\n\nCheck: {check.line()}"
    return dataclasses.replace(result, outcome=dataclasses.replace(result.outcome, answer=stamped))
