"""Profiles resolved once per run into what each agent gets: its tools within the run's
ceiling, whether it may delegate, whether it may run beside others, and whether the run
allows it at all. Everything after (building an agent, delegating, listing tools) reads
the spec; nothing resolves a profile again or asks for one by name.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from workers.assembly.profiles import Profile, expand_tools, is_parallel_safe
from workers.tools.base import Tool


@dataclass(frozen=True)
class AgentSpec:
    profile: Profile
    tools: tuple[str, ...]
    """The tools it is granted, patterns expanded, within the ceiling. `delegate` and
    `use_skill` are the harness's and are added when the agent is built."""
    may_delegate: bool
    """It hands work to workers: it plans, and is never offered as a worker itself."""
    parallel_safe: bool
    """Every tool it has is read-only, so it may run beside other readers."""
    changes_files: bool
    """One of its own tools can change the workspace: the harness snapshots the
    workspace around it and after each of its calls (workers/changes/change_sets.py)."""
    refusal: str | None
    """Why this run does not let it be delegated to, or None."""
    isolated: bool = False
    """An editor that works on a copy of its own (workers/changes/worktrees.py) and runs beside
    other isolated editors; never one that delegates (its workers would edit the
    workspace itself)."""

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def in_container(self) -> bool:
        return self.profile.sandbox == "docker"


def resolve(
    profiles: dict[str, Profile],
    tools: dict[str, Tool[Any]],
    *,
    read_only: bool = False,
    allowed: Collection[str] | None = None,
    isolate: bool = False,
) -> dict[str, AgentSpec]:
    """Every profile as a spec for this run. `read_only` keeps only read-only tools and
    parallel-safe workers; `allowed` names the only profiles workers may have; `isolate`
    gives every editor that does not delegate a copy of its own (`--isolate`).

    Plugin and MCP tools run in gaffer's own process, so a profile in a container never
    gets them: its tools all run in its container. An isolated editor keeps only the
    read-only ones: the others would change the workspace, not its copy.
    """
    reads_only = {name: tool.read_only for name, tool in tools.items()}
    extensions = {name for name, tool in tools.items() if tool.kind == "extension"}
    specs = {}
    for name, profile in profiles.items():
        granted = [n for n in expand_tools(profile.tools, reads_only, extensions) if n in tools]
        if profile.sandbox == "docker":
            granted = [n for n in granted if n not in extensions]
        if read_only:
            granted = [n for n in granted if tools[n].read_only]
        parallel_safe = is_parallel_safe(profile, reads_only, extensions)
        may_delegate = "delegate" in profile.tools
        isolated = (isolate or profile.isolate) and not parallel_safe and not may_delegate
        if isolated:
            granted = [n for n in granted if n not in extensions or tools[n].read_only]
        refusal = None
        if allowed is not None and name not in allowed:
            refusal = f"this run allows only the profiles {', '.join(sorted(allowed))}"
        elif read_only and not parallel_safe:
            refusal = f"this run is read-only and {name!r} can change files"
        specs[name] = AgentSpec(
            profile=profile,
            tools=tuple(granted),
            may_delegate=may_delegate,
            parallel_safe=parallel_safe,
            changes_files=not all(tools[n].read_only for n in granted),
            refusal=refusal,
            isolated=isolated and not read_only,
        )
    return specs
