"""Delegation: the `delegate` tool, the run's ceiling on it, and building each agent.

Every agent, the supervisor included, is built here from its profile and runs the same
loop. A worker's report to its caller is written by the harness from what it observed
(status, files changed, commands and exit codes, tokens), never by the worker's model.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from pydantic import Field, create_model

from supervisor.reports import report_text
from supervisor.scheduler import Scheduler, WorkerRun
from workers.agent import Agent, AgentResult
from workers.context import ContextKeeper, window_for
from workers.editing import EDIT_TOOLS, EDIT_WITH_TOOLS, EditGuard
from workers.events import Emitter
from workers.file_blocks import HOW_TO_WRITE, WRITE_BLOCKS, WRITE_NOW
from workers.limits import Budget
from workers.loop import run_agent
from workers.model import Message, Model
from workers.profiles import Profile, expand_tools, is_parallel_safe
from workers.sandbox import Sandbox
from workers.tools.base import Args, Tool, ToolContext, ToolResult, result_chars
from workers.tools.files import workspace_glance
from workers.tools.memory import project_instructions
from workers.verification import (
    DEFAULT_MAX_SEND_BACKS,
    Gate,
    files_changed,
)

# Tools that let an agent look at the code for itself.
READ_TOOLS = frozenset({"read_file", "list_dir", "grep", "find_files"})


SandboxFactory = Callable[[Profile, str], AbstractContextManager[Sandbox]]
"""(profile, agent_id) -> a context that yields the sandbox and tears it down after."""


@dataclass(frozen=True)
class Ceiling:
    """What the run allows, whatever a profile asks for."""

    read_only: bool = False
    """Only parallel-safe (read-only) profiles may be delegated to."""
    profiles: frozenset[str] | None = None
    """Only these profiles may be delegated to; None allows all."""
    max_parallel: int = 4
    max_depth: int = 2
    max_workers: int = 32


@dataclass(frozen=True)
class Caller:
    """An agent that may delegate: who it is, how deep, and the budget its workers share."""

    agent_id: str
    depth: int
    budget: Budget
    events: Emitter
    lineage: tuple[str, ...] = ()
    """Agent ids from the top down to this one: a worker may use an editor lock its
    ancestor holds, so an editor that delegates to an editor does not deadlock."""


@dataclass
class Team:
    """The run's profiles and the rules for building and delegating to agents."""

    workspace: Path
    profiles: dict[str, Profile]
    tools: dict[str, Tool[Any]]
    make_model: Callable[[str | None], Model]
    make_sandbox: SandboxFactory
    events: Emitter
    """Bound to the session only; each agent binds its own identity."""
    ceiling: Ceiling = field(default_factory=Ceiling)
    verify: bool = True
    """Run every agent's final answer through the verification gate (--no-verify turns it off)."""
    max_send_backs: int = DEFAULT_MAX_SEND_BACKS
    file_blocks: bool = False
    """Editing agents write files as fenced blocks in their replies, not as calls."""
    context_window: int | None = None
    """Tokens; None takes the model's known window or a conservative default."""
    use_skill: Tool[Any] | None = None
    """Given to every agent when there are skills."""
    extra_prompt: str = ""
    """Appended to every agent's system prompt (the list of skills)."""
    task_mode: bool = False
    """The top agent was given a task to do (`gaffer run`), not a conversation (`gaffer chat`)."""
    pool: ThreadPoolExecutor = field(init=False)
    scheduler: Scheduler = field(default_factory=Scheduler)

    def __post_init__(self) -> None:
        self.pool = ThreadPoolExecutor(
            self.ceiling.max_parallel, thread_name_prefix="gaffer-worker"
        )
        self._ids = itertools.count(1)
        self._started = 0
        self._lock = threading.Lock()
        # Read once per run: every agent starts from the same project instructions and
        # the same view of the workspace's layout.
        self.instructions = project_instructions(self.workspace, self._not_loaded)
        self.glance = workspace_glance(self.workspace)

    def _not_loaded(self, message: str) -> None:
        self.events.bind(agent_id="trust").emit(
            "boundary", action="refused", what="instructions", message=message
        )

    # -- what a profile gets -------------------------------------------------------

    def parallel_safe(self, profile: Profile) -> bool:
        return is_parallel_safe(profile, self._read_only(), self._extensions())

    def _read_only(self) -> dict[str, bool]:
        return {name: tool.read_only for name, tool in self.tools.items()}

    def _extensions(self) -> set[str]:
        return {n for n, tool in self.tools.items() if tool.is_extension}

    def refusal(self, profile_name: str) -> str | None:
        """Why the run's ceiling forbids delegating to this profile, or None."""
        profile = self.profiles.get(profile_name)
        if profile is None:
            return (
                f"there is no profile {profile_name!r}; use one of: {', '.join(self.delegable())}"
            )
        if self.ceiling.profiles is not None and profile_name not in self.ceiling.profiles:
            return f"this run allows only the profiles {', '.join(sorted(self.ceiling.profiles))}"
        if self.ceiling.read_only and not self.parallel_safe(profile):
            return f"this run is read-only and {profile_name!r} can change files"
        return None

    def delegable(self) -> list[str]:
        """Profiles offered as workers: those that do the work themselves. A profile that
        delegates (supervisor, dispatcher) plans and hands out work; it is never a worker."""
        return [
            name
            for name, profile in self.profiles.items()
            if "delegate" not in profile.tools and self.refusal(name) is None
        ]

    def effective_tools(self, profile: Profile) -> list[str]:
        """The profile's tools within the run's ceiling; `delegate` is added by `build`.

        Plugin and MCP tools run in gaffer's own process, so a sandboxed profile never
        gets them: its tools all run in its container.
        """
        extensions = self._extensions()
        names = [
            n for n in expand_tools(profile.tools, self._read_only(), extensions) if n in self.tools
        ]
        if profile.sandbox == "docker":
            names = [n for n in names if n not in extensions]
        if self.ceiling.read_only:
            names = [n for n in names if self.tools[n].read_only]
        return names

    def describe_profiles(self) -> str:
        lines = []
        for name in self.delegable():
            profile = self.profiles[name]
            kind = (
                "parallel, read-only"
                if self.parallel_safe(profile)
                else "one at a time, can change files"
            )
            where = ", in a Docker container" if profile.sandbox == "docker" else ""
            lines.append(f"- {name} ({kind}{where}): {profile.description}")
        return "\n".join(lines) or "- (none: this run allows no workers)"

    # -- building agents -------------------------------------------------------------

    def build(
        self,
        profile: Profile,
        agent_id: str,
        sandbox: Sandbox,
        budget: Budget,
        depth: int,
        parent: Caller | None,
    ) -> tuple[Agent, str]:
        """The agent for a profile, and its system prompt."""
        identity: dict[str, Any] = {"agent_id": agent_id, "profile": profile.name}
        if parent is not None:
            identity["parent_id"] = parent.agent_id
        events = self.events.bind(**identity)
        tools = {name: self.tools[name] for name in self.effective_tools(profile)}
        if self.use_skill is not None:
            tools["use_skill"] = self.use_skill
        if "delegate" in profile.tools and depth < self.ceiling.max_depth:
            lineage = (*parent.lineage, parent.agent_id) if parent else ()
            caller = Caller(agent_id, depth, budget, events, lineage)
            tools["delegate"] = self.delegate_tool(caller)
        model = self.make_model(profile.model)
        window = window_for(model.name, self.context_window)
        container_root = "/workspace" if profile.sandbox == "docker" else None
        file_blocks = self.file_blocks and "write_file" in tools
        # An agent given a task about the code (a worker, or the top agent of `gaffer run`),
        # with tools to read it, looks before it answers.
        must_look = (parent is not None or self.task_mode) and bool(READ_TOOLS & set(tools))
        agent = Agent(
            model=model,
            tools=tools,
            sandbox=sandbox,
            events=events,
            limits=profile.limits.as_limits(),
            budget=budget,
            pool=self.pool,
            gate=Gate(
                events,
                self.max_send_backs,
                workspace=self.workspace,
                container_root=container_root,
                must_look=must_look,
                # A small model (file blocks) describes a fix in prose and stops there.
                expects_change=must_look and file_blocks,
            )
            if self.verify
            else None,
            look_first=must_look,
            attach_task_files=(parent is not None or self.task_mode) and "read_file" in tools,
            container_root=container_root,
            file_blocks=file_blocks,
            context=ContextKeeper(window, rules=self.instructions),
            max_output_chars=result_chars(window),
            edits=EditGuard(
                self.workspace, container_root, write_hint=WRITE_NOW if file_blocks else ""
            )
            if EDIT_TOOLS & set(tools) or "run_shell" in tools
            else None,
        )
        workspace = "/workspace" if profile.sandbox == "docker" else str(self.workspace)
        prompt = profile.system_prompt.replace("{workspace}", workspace)
        prompt = prompt.replace("{profiles}", self.describe_profiles())
        # How this agent changes files, where the profile says `{editing}`.
        prompt = prompt.replace("{editing}", WRITE_BLOCKS if file_blocks else EDIT_WITH_TOOLS)
        prompt = prompt.strip()
        if file_blocks:
            prompt += "\n\n# Writing files\n\n" + HOW_TO_WRITE
        if self.glance:
            prompt += "\n\n# The workspace at a glance\n\n" + self.glance
        if self.instructions:
            prompt += "\n\n# Project instructions (follow them)\n\n" + self.instructions
        if self.extra_prompt:
            prompt += "\n\n" + self.extra_prompt
        return agent, prompt

    def delegate_tool(self, caller: Caller) -> Tool[Any]:
        names = self.delegable() or ["none"]
        # The profile argument is an enum of what this run allows: models follow enums.
        args_model = create_model(
            "DelegateArgs",
            __base__=Args,
            profile=(
                str,
                Field(
                    description="Which worker profile: " + ", ".join(names),
                    json_schema_extra={"enum": cast(Any, names)},
                ),
            ),
            task=(
                str,
                Field(description="A self-contained task: what to do, where, and what to report."),
            ),
        )

        def run(_ctx: ToolContext, args: Any) -> ToolResult:
            return self.delegate(caller, args.profile, args.task)

        def overlaps(args: Any) -> bool:
            profile = self.profiles.get(args.profile)
            return (
                profile is not None
                and self.refusal(args.profile) is None
                and self.parallel_safe(profile)
            )

        return Tool(
            name="delegate",
            description=(
                "Hand a task to a worker agent with the given profile and get its report. Several "
                "delegate calls in one turn to read-only profiles run in parallel; profiles that "
                "change files run one at a time, in the order called."
            ),
            args=args_model,
            run=run,
            read_only=False,
            overlaps=overlaps,
            harness=True,
            origin="harness",
        )

    # -- delegating ------------------------------------------------------------------

    def delegate(self, caller: Caller, profile_name: str, task: str) -> ToolResult:
        if problem := self._why_not(caller, profile_name, task):
            return ToolResult(
                output=f"not started: {problem}", summary=f"refused: {problem}"[:90], is_error=True
            )
        profile = self.profiles[profile_name]
        agent_id = f"w{next(self._ids)}"
        budget = caller.budget.child(profile.limits.as_limits())
        parallel = self.parallel_safe(profile)
        tools = self.effective_tools(profile)
        caller.events.emit(
            "delegate_start",
            child_id=agent_id,
            child_profile=profile_name,
            task=task,
            tools=tools
            + (
                ["delegate"]
                if "delegate" in profile.tools and caller.depth + 1 < self.ceiling.max_depth
                else []
            ),
            sandbox=profile.sandbox,
            parallel_safe=parallel,
            max_steps=profile.limits.max_steps,
            max_seconds=budget.seconds_left(),
            max_tokens=budget.tokens_left(),
        )
        started = time.monotonic()
        report = self._run_worker(caller, profile, agent_id, task, budget, parallel)
        files = files_changed(report.result.facts)
        caller.events.emit(
            "delegate_end",
            child_id=agent_id,
            child_profile=profile_name,
            status=report.status,
            reason=report.reason,
            steps=report.result.steps,
            tokens=budget.used,
            tool_calls=report.result.tool_calls,
            elapsed_s=round(time.monotonic() - started, 3),
            files_changed=files,
        )
        text = report_text(
            agent_id, profile_name, report, files, budget.used, time.monotonic() - started
        )
        return ToolResult(
            output=text,
            summary=f"{agent_id} {report.status}, {len(files)} file{'s' if len(files) != 1 else ''} changed",
            is_error=report.status != "completed",
            facts={
                "worker": agent_id,
                "status": report.status,
                "modified": files,
                "evidence": report.result.facts,
            },
        )

    def _why_not(self, caller: Caller, profile_name: str, task: str) -> str | None:
        if problem := self.refusal(profile_name):
            return problem
        if caller.depth + 1 > self.ceiling.max_depth:
            return f"workers may nest at most {self.ceiling.max_depth} deep"
        if not task.strip():
            return "the task is empty; say what the worker should do"
        if caller.budget.cancelled():
            return "the run is being cancelled"
        tokens, seconds = caller.budget.tokens_left(), caller.budget.seconds_left()
        if tokens is not None and tokens <= 0:
            return "the token budget is spent"
        if seconds is not None and seconds <= 1:
            return "the time budget is spent"
        with self._lock:
            if self._started >= self.ceiling.max_workers:
                return f"this run has already started its maximum of {self.ceiling.max_workers} workers"
            self._started += 1
        return None

    def _run_worker(
        self,
        caller: Caller,
        profile: Profile,
        agent_id: str,
        task: str,
        budget: Budget,
        parallel: bool,
    ) -> WorkerRun:
        def work(quarantined: Callable[[list[Any]], None]) -> AgentResult:
            sandbox = None
            try:
                with self.make_sandbox(profile, agent_id) as sandbox:
                    agent, prompt = self.build(
                        profile, agent_id, sandbox, budget, caller.depth + 1, caller
                    )
                    system: Message = {"role": "system", "content": prompt}
                    return run_agent(agent, [system, {"role": "user", "content": task}])
            finally:
                quarantined(sandbox.quarantined if sandbox is not None else [])

        return self.scheduler.run(
            agent_id,
            (*caller.lineage, caller.agent_id),
            exclusive=not parallel,
            budget=budget,
            cancelled=caller.budget.cancelled,
            work=work,
        )

    def shutdown(self) -> None:
        """Wait briefly for workers to write their last lines, then let the rest go."""
        self.scheduler.shutdown()
        self.pool.shutdown(wait=False, cancel_futures=True)
