"""Every agent, the supervisor included, is built here: a spec, a model and a sandbox
become an Agent and its system prompt. What runs is decided in supervisor/; how an
agent is put together is decided only here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.agent import Agent
from workers.aids import aids_for
from workers.aids.file_blocks import HOW_TO_WRITE, WRITE_BLOCKS
from workers.assembly.specs import AgentSpec
from workers.changes.snapshots import Store
from workers.changes.tracker import ChangeTracker
from workers.check.checker import Checker
from workers.guard_hooks import Guards
from workers.guards.citations import Citations
from workers.guards.context import ContextKeeper, window_for
from workers.guards.editing import EDIT_TOOLS, EDIT_WITH_TOOLS, EditGuard
from workers.guards.named_code import named_paths
from workers.guards.repetition import RepetitionGuard
from workers.guards.replies import ReplyGuard
from workers.guards.time_left import TimeKeeper
from workers.guards.verification import DEFAULT_MAX_SEND_BACKS, Gate
from workers.hooks import Aids
from workers.limits import Budget
from workers.log.events import Emitter
from workers.log.schema import Boundary
from workers.model import Model
from workers.permissions.gate import Actor, PermissionGuard, Permissions
from workers.permissions.modes import PLAN_NOTE
from workers.repo_map.ranking import RunMap, files_shown, map_chars
from workers.repo_map.tool import find_symbol_tool
from workers.sandbox import Sandbox
from workers.stepping import Stepper
from workers.tools.base import Tool, result_chars
from workers.user_hooks.fire import HookGuard, Hooks

# Tools that let an agent look at the code for itself.
READ_TOOLS = frozenset({"read_file", "list_dir", "grep", "find_files"})
CONTAINER_ROOT = "/workspace"


@dataclass(frozen=True)
class AgentRules:
    """How every agent of a run is held and helped: made once from the user's validated
    settings (supervisor/settings.py) and handed down whole, never copied field by field."""

    verify: bool = True
    """Final answers go through the verification gate."""
    max_send_backs: int = DEFAULT_MAX_SEND_BACKS
    file_blocks: bool = False
    """Editing agents write files as fenced blocks in their replies, not as calls."""
    context_window: int | None = None
    """Tokens; None takes the model's known window or a conservative default."""
    test_runners: tuple[str, ...] = ()
    """Test runners besides the known ones (workers/guards/test_runs.py), for the gate."""
    workers_at_once: int = 4
    """Readers that may work at once (what the server serves at once, on the bundled
    model): a question's parts go to no more workers than this (workers/aids/task_parts.py)."""
    joins_reports: bool = False
    """An agent that looks through workers gives their answers, joined, as its own: the
    run's top model is a small one, which shown their answers writes them out again
    (workers/aids/joined_reports.py). Not `file_blocks`: with `--workers-local` that is
    the workers' way, and a remote top writes its own answer."""


@dataclass(frozen=True)
class RunSetting:
    """What every agent of a run shares: its rules, and what is read once per run."""

    workspace: Path
    rules: AgentRules = field(default_factory=AgentRules)
    instructions: str = ""
    """The project's AGENT.md / AGENTS.md, read once per run."""
    glance: str = ""
    """The workspace's layout at a glance, read once per run: shown where the repo map
    has nothing to show."""
    started_in: str = ""
    """Where in it the user started gaffer, when not at its top (a line, or "")."""
    code_map: RunMap | None = None
    """The workspace's code, file by file with what each defines, built once per run
    and ranked toward the user's task (workers/repo_map/); None: the glance alone."""
    extra_prompt: str = ""
    """Appended to every system prompt (the list of skills)."""
    store: Store | None = None
    """Snapshots of the workspace, for agents that can change it; None sees no changes."""
    diff_folder: Path | None = None
    """Where each agent's change set is written as a unified diff (beside the log)."""
    user_task: str = ""
    """What the user asked for (a conversation's first message): its rules on the tests
    hold for every agent of the run, whatever a worker's own task says."""
    checker: Checker | None = None
    """The run's check, run when an agent that changed files answers; None: its own
    evidence alone is judged (a run that could change nothing, or --no-verify)."""
    permissions: Permissions | None = None
    """The run's rules and mode, judged before every call of every agent built here."""
    hooks: Hooks | None = None
    """The user's pre_tool and post_tool hooks, for every agent built here."""


def build_agent(
    spec: AgentSpec,
    tools: dict[str, Tool[Any]],
    *,
    model: Model,
    sandbox: Sandbox,
    budget: Budget,
    events: Emitter,
    setting: RunSetting,
    given_a_task: bool,
    profiles_text: str = "",
    reader: str | None = None,
    stepper: Stepper | None = None,
) -> tuple[Agent, str]:
    """The agent for `spec` with exactly `tools` (its own, plus any the harness adds),
    and its system prompt. An agent `given_a_task` (a worker, or the top agent of `gaffer
    run`) with tools to read the code looks before it answers and has the files its task
    is about attached. `reader`: the profile it may hand a question's parts to."""
    container_root = CONTAINER_ROOT if spec.in_container else None
    rules = setting.rules
    if READ_TOOLS & set(tools):  # where a name is defined, in one call, for any reader
        tools = {**tools, "find_symbol": find_symbol_tool(setting.workspace)}
    file_blocks = rules.file_blocks and "write_file" in tools
    # One that reads nothing itself and answers before any worker has reported
    # makes its answer up: it looks through its workers.
    works_through_workers = "delegate" in tools and not READ_TOOLS & set(tools)
    must_look = given_a_task and (bool(READ_TOOLS & set(tools)) or works_through_workers)
    window = window_for(model.name, spec.profile.context_window or rules.context_window)
    code = code_shown(setting, window)
    # A reader given a task answers from what its calls showed it and the map it was
    # shown; one that looks through workers, from their reports.
    cites = must_look and (spec.parallel_safe or works_through_workers)
    gate = Gate(
        events,
        rules.max_send_backs,
        workspace=setting.workspace,
        container_root=container_root,
        must_look=must_look,
        look_with="your workers (delegate)" if works_through_workers else Gate.look_with,
        through_workers=works_through_workers,
        test_runners=rules.test_runners,
        checker=setting.checker,
        check_task=setting.user_task,
        # A small model (file blocks) describes a fix in prose and stops there.
        expects_change=must_look and file_blocks,
        citations=Citations(
            code_map=setting.code_map.get() if setting.code_map else None,
            shown=frozenset(files_shown(code) if code else named_paths(setting.glance)),
            container_root=container_root,
            through_workers=works_through_workers,
        )
        if cites
        else None,
    )
    aids = aids_for(
        tools,
        container_root,
        attach_task_files=given_a_task and "read_file" in tools,
        file_blocks=file_blocks,
        tracks_changes=setting.store is not None and spec.changes_files,
        works_through_workers=works_through_workers,
        reader=reader,
        workspace=setting.workspace,
        user_task=setting.user_task,
        at_once=rules.workers_at_once,
        joins_reports=rules.joins_reports,
        find=setting.code_map.best if setting.code_map else None,
    )
    edits = EditGuard(
        setting.workspace,
        container_root,
        hint=aids.hint,
        test_runners=rules.test_runners,
        room=result_chars(window),
    )
    changes = _tracker(spec, setting, events)
    agent = Agent(
        model=model,
        tools=tools,
        sandbox=sandbox,
        events=events,
        limits=spec.profile.limits.as_limits(),
        budget=budget,
        guards=guards_for(
            aids,
            context=ContextKeeper(
                window, rules=setting.instructions, test_runners=rules.test_runners
            ),
            edits=edits if EDIT_TOOLS & set(tools) or "run_shell" in tools else None,
            gate=gate if rules.verify else None,
            permissions=_permission_guard(spec, tools, setting, events, container_root),
            hooks=HookGuard(setting.hooks, events, sandbox, budget, changes)
            if setting.hooks
            else None,
        ),
        look_first=must_look,
        calls_first=cites and not works_through_workers,
        aids=aids,
        max_output_chars=result_chars(window),
        test_runners=rules.test_runners,
        changes=changes,
        stepper=stepper,
    )
    prompt = system_prompt(
        spec, setting, file_blocks=file_blocks, profiles=profiles_text, code=code
    )
    return agent, prompt


def code_shown(setting: RunSetting, window: int) -> str:
    """The repo map an agent with this window is shown ("" when nothing is mapped): the
    same for every agent of the run with that window, so their prompts share a prefix."""
    if setting.code_map is None:
        return ""
    return setting.code_map.shown(setting.user_task, map_chars(window))


def guards_for(
    aids: Aids,
    *,
    context: ContextKeeper | None = None,
    edits: EditGuard | None = None,
    gate: Gate | None = None,
    permissions: PermissionGuard | None = None,
    hooks: HookGuard | None = None,
) -> Guards:
    """An agent's guards, in the order they are asked: the window is fitted before a call
    is shaped; a repeated call is refused before it is judged as an edit; the gate judges
    the answer last; the run's permissions judge a call last, so none that another guard
    refuses is asked about, and the user's tool hooks run only for what may run. `edits`: for an agent that edits files (or runs commands);
    `gate`: None answers without checking."""
    if edits is not None:
        edits.writes_in_blocks = aids.writes_while_paused
    repetition = RepetitionGuard(
        # Not for an editor: with tools off it could only talk, and stop unfinished.
        pauses=edits is None or aids.writes_while_paused,
        hint=aids.hint,
        reads_only=edits is None,  # it edits nothing itself: a result cannot move
    )
    # After the gate, so its held-back results reach the gate, the editing guard and the
    # repetition guard as held back (a call's results pass from the last guard back).
    keeper = TimeKeeper()
    chosen = (context, ReplyGuard(), repetition, edits, gate, keeper, permissions, hooks)
    return Guards(tuple(guard for guard in chosen if guard is not None))


def _permission_guard(
    spec: AgentSpec,
    tools: dict[str, Tool[Any]],
    setting: RunSetting,
    events: Emitter,
    container_root: str | None,
) -> PermissionGuard | None:
    if setting.permissions is None:
        return None
    actor = Actor(
        agent_id=str(events.context.get("agent_id", "agent")),
        profile=spec.name,
        in_container=spec.in_container,
        read_only_tools=frozenset(name for name, tool in tools.items() if tool.read_only),
        workspace=setting.workspace,
        container_root=container_root,
    )
    return PermissionGuard(setting.permissions, actor, events)


def _tracker(spec: AgentSpec, setting: RunSetting, events: Emitter) -> ChangeTracker | None:
    if setting.store is None or not spec.changes_files:
        return None
    name = f"{events.context.get('agent_id', 'agent')}.diff"
    try:
        return ChangeTracker(
            setting.store, setting.diff_folder / name if setting.diff_folder else None
        )
    except OSError as error:  # a full disk, an unusable state folder: it runs without
        events.emit(
            Boundary(
                action="skipped",
                what="change set",
                message=f"cannot snapshot the workspace ({error}): this agent's changes are "
                "seen only through its file tools, and cannot be undone",
            )
        )
        return None


def system_prompt(
    spec: AgentSpec,
    setting: RunSetting,
    *,
    file_blocks: bool,
    profiles: str,
    code: str = "",
) -> str:
    """The agent's instructions: its profile's, how it writes files, the workspace (the
    repo map it is shown as `code`, else the glance), and the project's own."""
    workspace = CONTAINER_ROOT if spec.in_container else str(setting.workspace)
    prompt = spec.profile.system_prompt.replace("{workspace}", workspace)
    prompt = prompt.replace("{profiles}", profiles)
    # How this agent changes files, where the profile says `{editing}`.
    prompt = prompt.replace("{editing}", WRITE_BLOCKS if file_blocks else EDIT_WITH_TOOLS)
    prompt = prompt.strip()
    if file_blocks:
        prompt += "\n\n# Writing files\n\n" + HOW_TO_WRITE
    if code:
        prompt += "\n\n# The workspace's code\n\n" + code + setting.started_in
    elif setting.glance:
        prompt += "\n\n# The workspace at a glance\n\n" + setting.glance + setting.started_in
    if setting.instructions:
        prompt += "\n\n# Project instructions (follow them)\n\n" + setting.instructions
    if setting.extra_prompt:
        prompt += "\n\n" + setting.extra_prompt
    if setting.permissions is not None and setting.permissions.mode == "plan":
        prompt += "\n\n" + PLAN_NOTE
    return prompt
