"""Prompt tokens of each built-in profile's first step, as the endpoint counts them.

On two cores a small model reads about 30 tokens a second, so every token of a system
prompt and of the tool descriptions costs time at every fresh start of an agent. The
request is the one gaffer sends (system prompt, task, tool schemas), answered with one
token; run against the local model, the tools described in the system message as gaffer
sends them to it (`calls_as_text`, workers/model/text_calls.py).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from bench.common import Row
from supervisor.delegation import Team
from supervisor.local import server, store
from supervisor.run_plan import RunPlan
from workers.assembly.profiles import builtin_dir, load_profiles
from workers.limits import Budget
from workers.log.events import Emitter
from workers.model import Model
from workers.model.openai_client import OpenAIModel
from workers.sandbox.host import HostSandbox
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import ToolContext

TASK = "Survey this repository for a newcomer: what each top-level folder is for."
PROFILES = ("supervisor", "dispatcher", "explorer", "coder", "shell")


def first_prompt_tokens(model: Model, workspace: Path, profile_name: str) -> int:
    profiles = load_profiles([builtin_dir()], BUILTIN_TOOLS)
    team = Team(
        workspace,
        RunPlan(profiles, dict(BUILTIN_TOOLS), make_model=lambda *_: model),
        make_model=lambda *_: model,
        make_sandbox=lambda _p, _a: contextlib.nullcontext(HostSandbox(ToolContext(workspace))),
        events=Emitter(),
    )
    try:
        agent, prompt = team.build(
            team.specs[profile_name],
            "bench",
            HostSandbox(ToolContext(workspace)),
            Budget(),
            depth=0,
            parent=None,
        )
        schemas = [tool.schema() for tool in agent.tools.values()]
        turn = model.complete(
            [{"role": "system", "content": prompt}, {"role": "user", "content": TASK}], schemas
        )
        return turn.usage.prompt_tokens
    finally:
        team.shutdown()


# This repository: its layout is what every agent's system prompt shows at a glance.
WORKSPACE = Path(__file__).resolve().parent.parent


def run() -> list[Row]:
    if not store.is_pulled():
        return [Row("prompt tokens: skipped (the local model is not pulled)", 0, "")]
    with server.for_this_run() as running:
        model = OpenAIModel(
            model=running.model,
            base_url=running.base_url,
            api_key=None,
            max_output_tokens=1,
            calls_as_text=True,
        )
        return [
            Row(
                f"prompt tokens: {name} profile's first step (local model, this repository)",
                first_prompt_tokens(model, WORKSPACE, name),
                "tokens",
            )
            for name in PROFILES
        ]
