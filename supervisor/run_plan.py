"""What a run is, besides its task: who works, with what, within which limits. Made once
by supervisor/run_setup.py from the validated settings and handed down whole: the
session and the team read it, and no field of it is copied into another container."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workers.assembly.build import AgentRules
from workers.assembly.profiles import Profile
from workers.cluster.driver import Cluster
from workers.extensions import Extensions
from workers.model import MakeModel
from workers.permissions.gate import Permissions
from workers.stepping import Stepper
from workers.tools.base import Approver, Tool, deny_all
from workers.user_hooks.config import HookSet

if TYPE_CHECKING:
    from supervisor.settings import Price


@dataclass(frozen=True)
class Ceiling:
    """What the run allows, whatever a profile asks for."""

    read_only: bool = False
    """Only parallel-safe (read-only) profiles may be delegated to."""
    profiles: frozenset[str] | None = None
    """Only these profiles may be delegated to; None allows all."""
    max_parallel: int = 4
    isolate: bool = False
    """Every editor that does not delegate works on a copy of its own (--isolate)."""
    max_depth: int = 2
    max_workers: int = 32


@dataclass
class RunPlan:
    """Everything a run needs besides the task: who works, with what, within which limits."""

    profiles: dict[str, Profile]
    tools: dict[str, Tool[Any]]
    make_model: MakeModel
    """A model by name; None means the run's model."""
    top: str = "supervisor"
    """The profile of the agent the user talks to."""
    max_steps: int | None = None
    """Overrides the top profile's step limit (--max-steps)."""
    max_seconds: float | None = None
    """For every agent together."""
    max_tokens: int | None = None
    max_cost: float | None = None
    """Dollars the run may spend (--max-cost), by `prices`."""
    """For every agent together."""
    ceiling: Ceiling = field(default_factory=Ceiling)
    approve: Approver = deny_all
    """Asks the user about a host command of their own (the chat's `!cmd`)."""
    permissions: Permissions | None = None
    hooks: HookSet | None = None
    """The user's hooks (and a trusted workspace's), fired for every agent of the run."""
    """The run's rules and mode, judged before every agent's calls; None: no rules, the
    default mode, and asks go to `approve`."""
    base_url: str | None = None
    sandbox_uid: int | None = None
    """Run containers as this uid instead of the workspace owner's."""
    rules: AgentRules = field(default_factory=AgentRules)
    """How every agent is held and helped (Settings.agent_rules)."""
    extensions: Extensions | None = None
    """Plugins, MCP servers and skills; closed with the session."""
    task_mode: bool = False
    """`gaffer run`: the top agent works on a task and looks at the code before answering."""
    cluster: Cluster | None = None
    """Workers' tools run on this Ray cluster's nodes (--cluster); closed with the session."""
    stepper: Stepper | None = None
    """Step mode (--step): asked before the top agent's tool calls."""
    check: str | None = None
    """The check command the user gave (--check), or None to choose one."""
    check_config: str | None = None
    """The config's `check`, used when --check is not given."""
    require_verified: bool = False
    """An unverified change is a failure of the run (exit 4)."""
    prices: Mapping[str, Price] = field(default_factory=dict)
    """What each model's tokens cost, for the result's total_cost_usd."""
    step_workers: bool = False
    """--step=all: workers' tool calls are asked about too."""
