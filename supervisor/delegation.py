"""Delegation: the `delegate` tool and the run's rules for it (which profiles, how deep,
how many), and the identity each agent gets in the log. Profiles are resolved once per
run into specs (workers/assembly/specs.py), agents built from them in
workers/assembly/build.py, workers run under one lock in supervisor/scheduler.py; a
worker's report is written by the harness (supervisor/reports.py), never its model.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from supervisor import fan_out
from supervisor.delegate_tool import delegate_tool
from supervisor.isolation import isolated_work
from supervisor.reports import worker_report
from supervisor.run_plan import RunPlan
from supervisor.scheduler import Scheduler, Work, WorkerRun
from workers.agent import Agent, AgentResult
from workers.aids.task_parts import workers_share
from workers.aids.task_rules import read_only_tests
from workers.assembly.build import READ_TOOLS, RunSetting, build_agent
from workers.assembly.specs import AgentSpec, resolve
from workers.changes.snapshots import Store
from workers.changes.worktrees import Worktree, make_worktree
from workers.cluster.driver import RemoteCopy
from workers.guards.named_code import about_the_code
from workers.limits import WORKER_TIME_SHARE, Budget, worker_limits
from workers.log.events import Emitter
from workers.log.schema import Boundary, DelegateStart
from workers.loop import run_agent
from workers.model import MakeModel, Message
from workers.outcome import Aborted
from workers.repo_map.ranking import RunMap
from workers.sandbox import Sandbox
from workers.tools.base import Tool, ToolResult
from workers.tools.describe import started_in, workspace_glance
from workers.tools.memory import project_instructions

Copy = Worktree | RemoteCopy  # the workspace as an isolated editor or a cluster worker sees it

MakeSandbox = Callable[
    [AgentSpec, str, "Copy | None", tuple[str, ...]], AbstractContextManager[Sandbox]
]
"""(spec, agent_id, the worker's copy or None, the files its container mounts read-only)
-> a context that yields the sandbox and tears it down after (workers/placement.py)."""


@dataclass(frozen=True)
class Caller:
    """An agent that may delegate: who it is, how deep, and the budget its workers share."""

    agent_id: str
    depth: int
    budget: Budget
    events: Emitter
    lineage: tuple[str, ...] = ()
    """Agent ids from the top down to this one: the workers of an agent that holds the
    workspace lock share a lock of their own (supervisor/scheduler.py)."""
    worker_share: float = WORKER_TIME_SHARE  # of its time left, what its workers may use


@dataclass
class Team:
    """The run's agents: the rules for building them and for delegating to them, read
    from the run's plan."""

    workspace: Path
    plan: RunPlan
    make_model: MakeModel
    """The run's model unless a profile names one (the session's, which knows the top's)."""
    make_sandbox: MakeSandbox
    events: Emitter
    """Bound to the session only; each agent binds its own identity."""
    store: Store | None = None
    """Snapshots of the workspace for agents that can change it (their change sets)."""
    diff_folder: Path | None = None
    """Where each change set's unified diff is written (beside the log)."""
    scheduler: Scheduler = field(init=False)

    def __post_init__(self) -> None:
        self.scheduler = Scheduler(self.plan.ceiling.max_parallel)
        extensions = self.plan.extensions
        self.use_skill = extensions.use_skill() if extensions else None
        """Given to every agent when there are skills."""
        self._ids = itertools.count(1)
        self._progress: dict[str, AgentResult] = {}  # each running worker's, as it fills in
        self._started = 0
        self._lock = threading.Lock()
        self.specs = resolve(
            self.plan.profiles,
            self.plan.tools,
            read_only=self.plan.ceiling.read_only,
            allowed=self.plan.ceiling.profiles,
            isolate=self.plan.ceiling.isolate,
        )
        # Read once per run: every agent has the same instructions and view of the workspace.
        self.setting = RunSetting(
            workspace=self.workspace,
            rules=self.plan.rules,
            instructions=project_instructions(self.workspace, self._not_loaded),
            glance=workspace_glance(self.workspace),
            started_in=started_in(self.workspace),
            code_map=RunMap(self.workspace),
            extra_prompt=extensions.prompt() if extensions else "",
            store=self.store,
            diff_folder=self.diff_folder,
        )

    @property
    def instructions(self) -> str:
        return self.setting.instructions

    def _not_loaded(self, message: str) -> None:
        self.events.bind(agent_id="trust").emit(
            Boundary(action="refused", what="instructions", message=message)
        )

    # -- whom an agent may delegate to ---------------------------------------------

    def refusal(self, profile_name: str) -> str | None:
        """Why this run does not let an agent delegate to this profile, or None."""
        spec = self.specs.get(profile_name)
        if spec is None:
            return (
                f"there is no profile {profile_name!r}; use one of: {', '.join(self.delegable())}"
            )
        return spec.refusal

    def delegable(self) -> list[str]:
        """Profiles offered as workers: those that do the work themselves. A profile that
        delegates (supervisor, dispatcher) plans and hands out work: it is not offered, but
        one named all the same runs as a worker that may delegate in turn, nested no deeper
        than max_depth and within max_workers (tests/test_delegation.py)."""
        return [
            name
            for name, spec in self.specs.items()
            if not spec.may_delegate and spec.refusal is None
        ]

    def reader(self) -> str | None:
        """The profile a question's parts go to, one worker each (workers/aids/task_parts.py):
        `explorer` when it may be delegated to, else the first profile that only reads."""
        readers = [name for name in self.delegable() if self.specs[name].parallel_safe]
        return "explorer" if "explorer" in readers else next(iter(readers), None)

    def describe_profiles(self) -> str:
        lines = []
        for name in self.delegable():
            spec = self.specs[name]
            kind = "one at a time, can change files"
            if spec.parallel_safe:
                kind = "parallel, read-only"
            elif spec.isolated:
                kind = "parallel, each on a copy of its own; can change files"
            where = ", in a Docker container" if spec.in_container else ""
            lines.append(f"- {name} ({kind}{where}): {spec.profile.description}")
        return "\n".join(lines) or "- (none: this run allows no workers)"

    # -- building agents -------------------------------------------------------------

    def build(
        self,
        spec: AgentSpec,
        agent_id: str,
        sandbox: Sandbox,
        budget: Budget,
        depth: int,
        parent: Caller | None,
        setting: RunSetting | None = None,
        task: str = "",
    ) -> tuple[Agent, str]:
        """The agent for a spec, with its identity in the log and the harness's tools;
        `setting`: the run's, unless the agent works on a copy of the workspace. The top
        agent of `gaffer run` is given its `task` as a task (it looks before it answers)
        when the task is about the code; a plain question is answered as it is."""
        identity: dict[str, Any] = {"agent_id": agent_id, "profile": spec.name}
        if parent is not None:
            identity["parent_id"] = parent.agent_id
        if node := getattr(sandbox, "node", None):  # placed on a cluster node
            identity["node"] = node
        events = self.events.bind(**identity)
        tools = {name: self.plan.tools[name] for name in spec.tools}
        if self.use_skill is not None:
            tools["use_skill"] = self.use_skill
        if spec.may_delegate and depth < self.plan.ceiling.max_depth:
            lineage = (*parent.lineage, parent.agent_id) if parent else ()
            joins = self.plan.rules.joins_reports and not READ_TOOLS & set(tools)
            caller = Caller(agent_id, depth, budget, events, lineage, workers_share(joins, task))
            tools["delegate"] = self.delegate_tool(caller)
        return build_agent(
            spec,
            tools,
            model=self.make_model(spec.profile.model, spec.profile.api, spec.profile.endpoint),
            sandbox=sandbox,
            budget=budget,
            events=events,
            setting=setting or self.setting,
            given_a_task=parent is not None
            or (self.plan.task_mode and about_the_code(task, self.workspace)),
            profiles_text=self.describe_profiles(),
            reader=self.reader() if "delegate" in tools else None,
            stepper=self.plan.stepper if parent is None or self.plan.step_workers else None,
        )

    def delegate_tool(self, caller: Caller) -> Tool[Any]:
        def begin(profile: str, tasks: list[str]) -> Callable[[], ToolResult] | None:
            spec = self.specs.get(profile)
            if spec is None or spec.refusal is not None:
                return None
            if not (spec.parallel_safe or spec.isolated):
                return None  # run in order, one worker after another (`delegate`)
            started = [self.start_delegation(caller, profile, task) for task in tasks]
            return (
                started[0] if len(started) == 1 else fan_out.Together(started, caller.budget.cancel)
            )

        return delegate_tool(
            self.delegable(), lambda profile, tasks: self.delegate(caller, profile, tasks), begin
        )

    # -- delegating ------------------------------------------------------------------

    def delegate(self, caller: Caller, profile_name: str, tasks: list[str]) -> ToolResult:
        """Each task to a worker of its own, one after another; their reports in order."""

        def one(task: str) -> ToolResult:
            finish = self.start_delegation(caller, profile_name, task)
            try:
                return finish()
            except KeyboardInterrupt:
                caller.budget.cancel()
                finish()  # the worker ends now, and its end is logged
                raise

        return fan_out.in_turn(tasks, one)

    def start_delegation(
        self, caller: Caller, profile_name: str, task: str
    ) -> Callable[[], ToolResult]:
        """Start a worker (or refuse to); returns what waits for its report."""
        if problem := self._why_not(caller, profile_name, task) or self._count_worker():
            refused = ToolResult(
                output=f"not started: {problem}", summary=f"refused: {problem}"[:90], is_error=True
            )
            return lambda: refused
        spec = self.specs[profile_name]
        agent_id = f"w{next(self._ids)}"
        limits = worker_limits(spec.profile.limits.as_limits(), caller.budget, caller.worker_share)
        budget = caller.budget.child(limits)
        delegates = spec.may_delegate and caller.depth + 1 < self.plan.ceiling.max_depth
        caller.events.emit(
            DelegateStart(
                child_id=agent_id,
                child_profile=profile_name,
                task=task,
                tools=[*spec.tools, *(["delegate"] if delegates else [])],
                sandbox=spec.profile.sandbox,
                parallel_safe=spec.parallel_safe,
                max_steps=spec.profile.limits.max_steps,
                max_seconds=budget.seconds_left(),
                max_tokens=budget.tokens_left(),
            )
        )
        started = time.monotonic()
        wait = self._start_worker(caller, spec, agent_id, task, budget)
        return lambda: self._report(caller, spec, agent_id, wait(), budget, started)

    def _report(
        self,
        caller: Caller,
        spec: AgentSpec,
        agent_id: str,
        run: WorkerRun,
        budget: Budget,
        started: float,
    ) -> ToolResult:
        profile_name = spec.name
        if run.status in ("timeout", "cancelled") and (so_far := self._progress.get(agent_id)):
            # Abandoned mid-run: report how far it got, not an empty result.
            run = dataclasses.replace(
                run,
                result=dataclasses.replace(
                    so_far, outcome=run.result.outcome, facts=list(so_far.facts)
                ),
            )
        self._progress.pop(agent_id, None)
        return worker_report(
            caller.events,
            agent_id,
            profile_name,
            run,
            budget.used,
            started,
            self.plan.rules.test_runners,
        )

    def _why_not(self, caller: Caller, profile_name: str, task: str) -> str | None:
        if problem := self.refusal(profile_name):
            return problem
        if caller.depth + 1 > self.plan.ceiling.max_depth:
            return f"workers may nest at most {self.plan.ceiling.max_depth} deep"
        if not task.strip():
            return "the task is empty; say what the worker should do"
        if caller.budget.cancelled():
            return "the run is being cancelled"
        tokens, seconds = caller.budget.tokens_left(), caller.budget.seconds_left()
        if tokens is not None and tokens <= 0:
            return "the token budget is spent"
        if seconds is not None and seconds <= 1:
            return "the time budget is spent"
        return None

    def _count_worker(self) -> str | None:
        """Count one more worker started; why not, when the run has started its most."""
        with self._lock:
            if self._started >= self.plan.ceiling.max_workers:
                return f"this run has already started its maximum of {self.plan.ceiling.max_workers} workers"
            self._started += 1
        return None

    def _start_worker(
        self, caller: Caller, spec: AgentSpec, agent_id: str, task: str, budget: Budget
    ) -> Callable[[], WorkerRun]:
        run = functools.partial(self.run_worker, caller, spec, agent_id, task, budget)
        lineage = (*caller.lineage, caller.agent_id)
        work: Work = run
        if spec.isolated:
            events = self.events.bind(agent_id=agent_id, profile=spec.name, parent_id=lineage[-1])
            work = isolated_work(
                self.scheduler, self.store, events, agent_id, lineage, budget, run, self.copy_for
            )
        return self.scheduler.start(
            agent_id,
            lineage,
            exclusive=not spec.parallel_safe,
            budget=budget,
            work=work,
            isolated=spec.isolated,
        )

    def run_worker(
        self,
        caller: Caller,
        spec: AgentSpec,
        agent_id: str,
        task: str,
        budget: Budget,
        quarantined: Callable[[list[Any]], None],
        copy: Copy | None = None,
    ) -> AgentResult:
        """A worker's whole run in its own sandbox; on its `copy` when it is isolated, or
        on the cluster (a reader there takes the bundle of its batch)."""
        # A reader goes to the cluster; an editor there is isolated (its copy is given).
        if copy is None and self.plan.cluster and self.store and spec.parallel_safe:
            copy = self.plan.cluster.copy_of(self.store)
        setting = self.setting
        if copy is not None:  # snapshots of a copy on a node are the node's to take
            setting = dataclasses.replace(setting, workspace=copy.path or setting.workspace)
            setting = dataclasses.replace(setting, store=copy.store)
            if copy.path is None:  # its check runs over the merged workspace, at the top
                setting = dataclasses.replace(setting, checker=None)
        sandbox = None
        try:
            kept = read_only_tests(spec, task, setting)
            with self.make_sandbox(spec, agent_id, copy, kept) as sandbox:
                agent, prompt = self.build(
                    spec, agent_id, sandbox, budget, caller.depth + 1, caller, setting
                )
                system: Message = {"role": "system", "content": prompt}
                messages: list[Message] = [system, {"role": "user", "content": task}]
                progress = self._progress[agent_id] = AgentResult(Aborted("running"), messages)
                result = run_agent(agent, messages, progress)
        finally:
            quarantined(sandbox.quarantined if sandbox is not None else [])
        result.node = getattr(sandbox, "node", None)
        if (sent := getattr(sandbox, "sent_back", None)) is not None and self.store is not None:
            for data in sent.contents.values():  # named by the store, never by the node
                self.store.keep(data)
            result.changes = sent.changes
        return result

    def copy_for(self, agent_id: str) -> Copy:
        """An isolated editor's copy: a worktree here, or the batch's bundle on the cluster."""
        assert self.store is not None
        if self.plan.cluster is not None:
            return self.plan.cluster.copy_of(self.store)
        return make_worktree(self.store, agent_id)

    def shutdown(self) -> None:
        """Wait briefly for workers to write their last lines, then let the rest go."""
        self.scheduler.shutdown()
