"""One run of gaffer: its id, its log, its agent, and the totals at the end."""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from workers.eventlog import JsonlLog
from workers.events import Emitter, Recorder, Subscriber
from workers.limits import Budget, Limits
from workers.loop import Agent, AgentResult, run_agent
from workers.model import Message, Model
from workers.outcome import reason_of, status_of
from workers.sandbox.host import HostSandbox
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import Approver, ToolContext, deny_all

SYSTEM_PROMPT = """\
You are gaffer, a careful software engineer working in the repository at {workspace}.
Every path you use is relative to that folder; you cannot leave it.

How to work:
- Look before you change: list_dir, find_files, grep and read_file show you the code.
- Change files with edit_file (one exact match) or write_file (whole file).
- Check your work by running the project's tests with run_shell when there are any.
- Call several independent read-only tools in one turn when you can; it is faster.
- Do not repeat a call whose result you already have.
- When the task is done, reply with a short final answer: what you did and what you found,
  with file paths. Do not call more tools then.
"""


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
        self.log = JsonlLog(self.log_dir / f"{self.session_id}.jsonl")
        self.recorder = Recorder()
        self.events = Emitter([self.log, self.recorder, *self.subscribers]).bind(
            session_id=self.session_id, agent_id="main"
        )

    def run(
        self,
        task: str,
        model: Model,
        limits: Limits,
        *,
        approve: Approver = deny_all,
        base_url: str | None = None,
    ) -> AgentResult:
        started = time.monotonic()
        self.events.emit(
            "session_start",
            task=task,
            workspace=str(self.workspace),
            model=model.name,
            base_url=base_url,
            gaffer_version=gaffer_version(),
            pid=os.getpid(),
            max_steps=limits.max_steps,
            max_seconds=limits.max_seconds,
            max_tokens=limits.max_tokens,
        )
        budget = Budget(limits.max_tokens, limits.max_seconds)
        agent = Agent(
            model=model,
            tools=dict(BUILTIN_TOOLS),
            sandbox=HostSandbox(ToolContext(self.workspace, approve=approve, guard_shell=True)),
            events=self.events,
            limits=limits,
            budget=budget,
        )
        messages: list[Message] = [
            {"role": "system", "content": SYSTEM_PROMPT.format(workspace=self.workspace)},
            {"role": "user", "content": task},
        ]
        try:
            result = run_agent(agent, messages)
            self._end(result, budget, started)
        finally:
            self.log.close()
        return result

    def _end(self, result: AgentResult, budget: Budget, started: float) -> None:
        llm_calls = self.recorder.of("llm_call")
        self.events.emit(
            "session_end",
            status=status_of(result.outcome),
            reason=reason_of(result.outcome),
            elapsed_s=round(time.monotonic() - started, 3),
            steps=result.steps,
            tokens=budget.used,
            prompt_tokens=sum(r["prompt_tokens"] for r in llm_calls),
            completion_tokens=sum(r["completion_tokens"] for r in llm_calls),
            llm_calls=len(llm_calls),
            retries=len(self.recorder.of("llm_retry")),
            tool_calls=len(self.recorder.of("tool_call")),
            tool_errors=sum(1 for r in self.recorder.of("tool_call") if r["is_error"]),
        )
