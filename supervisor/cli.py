"""The `gaffer` command."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress

from supervisor import doctor as doctor_checks
from supervisor import runlog, settings
from supervisor import trust as trust_view
from supervisor.delegation import Ceiling, Team
from supervisor.local import server as local_server
from supervisor.local import store as local_store
from supervisor.repl import Repl, line_reader
from supervisor.resume import rebuild
from supervisor.session import RunPlan, Session, gaffer_version
from supervisor.view import TerminalView, profiles_table, stderr_console, tools_table
from workers import trust
from workers.events import Emitter, Subscriber
from workers.extensions import load_extensions
from workers.model import Model
from workers.model.openai_client import OpenAIModel
from workers.outcome import Aborted, Failed, Finished, LimitHit, reason_of
from workers.processes import hide_environment_secrets
from workers.profiles import HARNESS_TOOLS, Profile, ProfileError, load_profiles, search_path
from workers.sandbox import Sandbox, SandboxUnavailable, guard
from workers.sandbox.docker import container_spec
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import Approver, Tool, ToolError
from workers.tools.shell import looks_secret
from workers.tools.workspace import GAFFER_DIR, own_dir
from workers.trust import TrustStore, WorkspaceTrust

EXIT_OK, EXIT_ERROR, EXIT_LIMIT, EXIT_INTERRUPTED = 0, 1, 2, 130


def _fail(message: str, code: int = EXIT_ERROR) -> None:
    click.echo(f"gaffer: {message}", err=True)
    sys.exit(code)


@click.group(invoke_without_command=True)
@click.version_option(package_name="gaffer")
@click.pass_context
def main(ctx: click.Context) -> None:
    """gaffer: hand an LLM real work on a real repository, and see everything it did.

    `gaffer` alone opens a chat; `gaffer run "TASK"` runs one task and exits.
    """
    # The commands gaffer runs must not find its API key in /proc/<gaffer's pid>/environ.
    hide_environment_secrets(looks_secret)
    if ctx.invoked_subcommand is None:
        ctx.invoke(chat)


def run_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options `run` and `chat` share: the model, the limits, the ceiling, the log."""
    options = [
        click.option("--model", help="Model name [env GAFFER_MODEL]."),
        click.option("--base-url", help="OpenAI-compatible endpoint [env OPENAI_BASE_URL]."),
        click.option("--api-key", help="API key [env OPENAI_API_KEY]."),
        click.option(
            "--profile",
            "top",
            default="supervisor",
            show_default=True,
            help="Profile of the agent you talk to.",
        ),
        click.option(
            "--max-steps",
            type=int,
            help="Model calls the top agent may make per task (default: its profile's).",
        ),
        click.option(
            "--max-seconds",
            type=float,
            help="Wall-clock limit for the whole run, workers included.",
        ),
        click.option(
            "--max-tokens",
            type=int,
            help="Prompt + completion tokens for the whole run, workers included.",
        ),
        click.option(
            "--max-parallel", type=int, help="Read-only workers at the same time (default 4)."
        ),
        click.option(
            "--read-only", is_flag=True, help="Allow only read-only (parallel-safe) workers."
        ),
        click.option(
            "--profiles", "allowed", help="Comma-separated profiles workers may use; default all."
        ),
        click.option(
            "--log-dir",
            type=click.Path(path_type=Path),
            help="Where run logs go [env GAFFER_LOG_DIR].",
        ),
        click.option(
            "--yes",
            is_flag=True,
            help="Approve host shell commands outside the read-only allowlist.",
        ),
        click.option(
            "--no-stream", is_flag=True, help="Ask for whole responses instead of streams."
        ),
        click.option(
            "--no-verify", is_flag=True, help="Let final answers out without the verification gate."
        ),
        click.option("--context-window", type=int, help="The model's context window in tokens."),
        click.option("--sandbox-uid", type=int, help="Run sandbox containers as this uid."),
        click.option(
            "--local", is_flag=True, help="Use the local model even when an endpoint is set."
        ),
        click.option(
            "--trust-workspace",
            is_flag=True,
            help="Use this workspace's MCP servers, plugins, profiles, config and skills for "
            f"this run without `gaffer trust` [env {trust.TRUST_ENV}=1].",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _plan(
    workspace: Path,
    flags: dict[str, Any],
    approve: Approver,
    subscribers: list[Subscriber],
    stack: contextlib.ExitStack,
) -> tuple[Session, RunPlan]:
    """The session and its run plan from the flags, or a one-line exit 1.

    With no endpoint configured (or --local), the local model is fetched on first use
    and served for this run; `stack` stops it when the command ends.
    """
    top, read_only, allowed = flags.pop("top"), flags.pop("read_only"), flags.pop("allowed")
    use_local = flags.pop("local", False)
    workspace_trust = trust_view.evaluate(workspace, flags.pop("trust_workspace", False))
    flags.pop("yes", None)
    if flags.pop("no_stream", False):
        flags["stream"] = False
    if flags.pop("no_verify", False):
        flags["verify"] = False
    try:
        config = settings.load(flags, workspace_trust.config())
    except settings.ConfigError as error:
        _fail(str(error))
    if use_local or config.base_url is None:
        config = _with_local_model(config, stack)
    log_dir = config.logs_in(workspace)
    if config.log_dir is None:
        try:  # a repository may ship a .gaffer that links elsewhere: logs never follow it
            own_dir(workspace, GAFFER_DIR, "logs")
        except ToolError as error:
            _fail(str(error))
    session = Session(workspace, log_dir, subscribers)
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
        _fail(message)

    try:
        profiles = load_profiles(search_path(), tools, workspace_trust.sources("profile"))
    except ProfileError as error:
        abandon(str(error))
    if top not in profiles:
        abandon(f"no profile {top!r}; `gaffer profiles` lists them")
    allowed_set = frozenset(p.strip() for p in allowed.split(",") if p.strip()) if allowed else None
    if allowed_set and (unknown := sorted(allowed_set - profiles.keys())):
        abandon(f"--profiles names unknown profile(s): {', '.join(unknown)}")
    plan = RunPlan(
        profiles=profiles,
        tools=tools,
        make_model=_model_factory(config),
        top=top,
        max_steps=config.max_steps,
        max_seconds=config.max_seconds,
        max_tokens=config.max_tokens,
        ceiling=Ceiling(
            read_only=read_only,
            profiles=allowed_set,
            max_parallel=config.max_parallel,
            max_depth=config.max_depth,
            max_workers=config.max_workers,
        ),
        approve=approve,
        base_url=config.base_url,
        sandbox_uid=config.sandbox_uid,
        verify=config.verify,
        file_blocks=config.file_blocks,
        context_window=config.context_window,
        extensions=extensions,
    )
    return session, plan


@main.command()
@click.argument("task")
@run_options
@click.option("--quiet", is_flag=True, help="Show nothing on stderr but the outcome.")
@click.option(
    "--resume",
    "resume_ref",
    help="Continue the conversation of an earlier run (an id, a prefix, `last`).",
)
def run(task: str, quiet: bool, resume_ref: str | None, **flags: Any) -> None:
    """Run TASK in the current directory; the final answer goes to stdout."""
    workspace = Path.cwd().resolve()
    approve: Approver = (lambda _c, _r: True) if flags["yes"] else (lambda _c, _r: False)
    with contextlib.ExitStack() as stack:
        session, plan = _plan(workspace, flags, approve, [] if quiet else [TerminalView()], stack)
        plan.task_mode = True
        _run_task(session, plan, task, resume_ref)


def _run_task(session: Session, plan: RunPlan, task: str, resume_ref: str | None) -> None:
    resumed, resumed_from = None, None
    if resume_ref:
        try:
            path = runlog.find_run(session.log_dir, resume_ref, exclude=session.session_id)
        except runlog.RunNotFound as error:
            if plan.extensions is not None:
                plan.extensions.close()
            session.discard()
            _fail(str(error))
            return
        rebuilt = rebuild(runlog.read_records(path))
        resumed, resumed_from = rebuilt.messages, path.stem
        for worker in rebuilt.interrupted_workers:
            click.echo(f"gaffer: interrupted worker, not replayed: {worker}", err=True)
    result = session.run(task, plan, resumed=resumed, resumed_from=resumed_from)
    outcome = result.outcome
    match outcome:
        case Finished(answer=answer):
            click.echo(answer)
            sys.exit(EXIT_OK)
        case LimitHit(answer=answer):
            if answer:
                click.echo(answer)
            _fail(f"stopped: {reason_of(outcome)} (log: {session.log.path})", EXIT_LIMIT)
        case Aborted():
            _fail(f"interrupted: {reason_of(outcome)} (log: {session.log.path})", EXIT_INTERRUPTED)
        case Failed():
            _fail(f"error: {reason_of(outcome)} (log: {session.log.path})", EXIT_ERROR)


@main.command()
@run_options
def chat(**flags: Any) -> None:
    """A conversation in the current directory: line editing, history, slash commands (/help)."""
    workspace = Path.cwd().resolve()
    console = stderr_console()
    approve = (lambda _c, _r: True) if flags["yes"] else _ask_user(console)
    with contextlib.ExitStack() as stack:
        session, plan = _plan(workspace, flags, approve, [TerminalView(console)], stack)
        _chat(session, plan, workspace, console)


def _chat(session: Session, plan: RunPlan, workspace: Path, console: Console) -> None:
    session.start(plan)
    console.print(
        f"gaffer {gaffer_version()} · {plan.make_model(None).name} · {workspace}\n/help for commands, Ctrl-D to leave",
        markup=False,
        highlight=False,
    )
    try:
        Repl(session, console).loop(line_reader(history_path()))
    finally:
        session.close()
    click.echo(f"log: {session.log.path}", err=True)


def _ask_user(console: Console) -> Approver:
    def ask(command: str, reason: str) -> bool:
        console.print(
            f"run on this machine? {command}\n  ({reason})", markup=False, highlight=False
        )
        try:
            return input("  [y/N] ").strip().lower() in ("y", "yes")
        except EOFError:
            return False

    return ask


def history_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gaffer" / "history"


def _with_local_model(config: settings.Settings, stack: contextlib.ExitStack) -> settings.Settings:
    """Settings pointing at the local model's server, pulled and started as needed."""
    try:
        local_server.check_machine()
        if not local_store.is_pulled():
            _pull_with_progress()
        running = stack.enter_context(local_server.for_this_run())
    except (local_store.PullError, local_server.LocalUnavailable) as error:
        _fail(f"no endpoint is set (OPENAI_BASE_URL) and the local model cannot run here: {error}")
        raise
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
            "answer_prefill": local_server.ANSWER_OPENING,
            # Unless the user's config says otherwise.
            "file_blocks": config.file_blocks if "file_blocks" in config.model_fields_set else True,
        }
    )


def _pull_with_progress() -> Path:
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


def _model_factory(config: settings.Settings) -> Callable[[str | None], Model]:
    models: dict[str, Model] = {}
    lock = threading.Lock()

    def make(name: str | None) -> Model:
        name = name or config.model
        with lock:
            if name not in models:
                models[name] = OpenAIModel(
                    model=name,
                    base_url=config.base_url,
                    api_key=config.api_key,
                    max_attempts=config.max_attempts,
                    request_timeout=config.request_timeout,
                    stream=config.stream,
                    max_output_tokens=config.max_output_tokens,
                    temperature=config.temperature,
                    tool_prefill=config.tool_prefill,
                    answer_prefill=config.answer_prefill,
                )
            return models[name]

    return make


@main.command(name="profiles")
def list_profiles() -> None:
    """List the profiles: tools, sandbox, limits, parallel-safe or not, and where each came from."""
    workspace = Path.cwd().resolve()
    workspace_trust = trust_view.evaluate(workspace)
    try:
        profiles = load_profiles(search_path(), BUILTIN_TOOLS, workspace_trust.sources("profile"))
    except ProfileError as error:
        _fail(str(error))
    Console(highlight=False, soft_wrap=True).print(profiles_table(profiles, BUILTIN_TOOLS))
    _print_skipped(workspace_trust, ("profile",))


@main.command(name="tools")
def list_tools() -> None:
    """List every tool: built-in, plugin or MCP, read-only or not, and which profiles get it."""
    workspace = Path.cwd().resolve()
    workspace_trust = trust_view.evaluate(workspace)
    events = Emitter([TerminalView()]).bind(session_id="tools")
    extensions = load_extensions(
        workspace_trust,
        events,
        taken=set(BUILTIN_TOOLS) | HARNESS_TOOLS,
        log_dir=workspace / ".gaffer" / "logs",
    )
    try:
        tools = {**BUILTIN_TOOLS, **extensions.tools}
        profiles = load_profiles(search_path(), tools, workspace_trust.sources("profile"))
        team = Team(
            workspace,
            profiles,
            tools,
            make_model=_no_model,
            make_sandbox=_no_sandbox,
            events=events,
        )
        grants: dict[str, list[str]] = {}
        for profile in profiles.values():
            names = team.effective_tools(profile)
            names += [n for n in ("delegate",) if n in profile.tools]
            names += ["use_skill"] if extensions.skills else []
            for name in names:
                grants.setdefault(name, []).append(profile.name)
        listed: dict[str, Tool[Any]] = dict(tools)
        if extensions.skills and (use_skill := extensions.use_skill()) is not None:
            listed["use_skill"] = use_skill
        Console(highlight=False, soft_wrap=True).print(tools_table(listed, grants))
        team.shutdown()
    except ProfileError as error:
        _fail(str(error))
    finally:
        extensions.close()
    _print_skipped(workspace_trust, ("plugin", "mcp", "skill", "profile"))


def _print_skipped(workspace_trust: WorkspaceTrust, kinds: tuple[str, ...]) -> None:
    """The workspace's part in the listing: what of it was trusted, and what not loaded."""
    items = [i for i in workspace_trust.items if i.kind in kinds]
    if not items:
        return
    skipped = [i for i in items if not workspace_trust.allowed(i)]
    how = "for this run (--trust-workspace)" if workspace_trust.trust_all else "by `gaffer trust`"
    click.echo(
        f"\nworkspace: {len(items) - len(skipped)} item(s) trusted {how}, {len(skipped)} not loaded"
    )
    for item in skipped:
        click.echo(f"not loaded: {workspace_trust.notice(item).removeprefix('skipped ')}")


@main.command(name="trust")
@click.option("--yes", is_flag=True, help="Trust what is shown without asking.")
@click.option("--revoke", is_flag=True, help="Forget every approval for this workspace.")
def trust_command(yes: bool, revoke: bool) -> None:
    """Review what this workspace would have gaffer run or obey, and trust it.

    MCP servers in .mcp.json, plugins in .gaffer/tools, profiles in .gaffer/profiles,
    .gaffer/config.toml and skills in .gaffer/skills are used only once trusted; a
    change to any of them asks again. Approvals live in your own config folder.
    """
    workspace = Path.cwd().resolve()
    store = TrustStore(trust.default_store())
    if revoke:
        found = store.revoke(workspace)
        click.echo(
            f"{'forgot the approvals for' if found else 'nothing was trusted in'} {workspace}"
        )
        return
    workspace_trust = trust.evaluate(workspace)
    if not workspace_trust.items and not workspace_trust.refused:
        click.echo(
            f"nothing in {workspace} asks for trust: no .mcp.json, and no plugins, profiles, config or skills in .gaffer/"
        )
        return
    click.echo(f"{workspace} has {len(workspace_trust.items)} item(s) gaffer would run or obey:")
    for line in trust_view.review(workspace_trust):
        click.echo(line)
    pending = [i for i in workspace_trust.items if i.state != "trusted"]
    if not pending:
        click.echo("everything here is trusted as it is now")
        return
    if not yes:
        if not sys.stdin.isatty():
            click.echo(
                f"not trusted yet: run `gaffer trust --yes` to trust the {len(pending)} new or changed item(s)"
            )
            return
        if not click.confirm(
            f"trust the {len(pending)} new or changed item(s) as they are now?", default=False
        ):
            click.echo("nothing trusted")
            return
    store.approve(workspace, workspace_trust.items)
    click.echo(
        f"trusted {len(workspace_trust.items)} item(s) of {workspace}; a change to any of them asks again"
    )


def _no_model(_name: str | None) -> Model:
    raise RuntimeError("listing tools calls no model")


def _no_sandbox(_profile: Profile, _agent_id: str) -> AbstractContextManager[Sandbox]:
    raise RuntimeError("listing tools starts no sandbox")


@main.group()
def local() -> None:
    """The local model: Qwen2.5-Coder-1.5B served by llama.cpp on 127.0.0.1."""


@local.command(name="pull")
def local_pull() -> None:
    """Fetch and verify the model (once; cached under ~/.cache/gaffer/models)."""
    try:
        path = local_store.model_path() if local_store.is_pulled() else _pull_with_progress()
    except local_store.PullError as error:
        _fail(str(error))
        return
    click.echo(f"model ready: {path}")


@local.command(name="start")
def local_start() -> None:
    """Start the server and leave it running for later runs."""
    if (found := local_server.running()) is not None:
        click.echo(f"already running: {found.base_url} (pid {found.pid})")
        return
    try:
        if not local_store.is_pulled():
            _pull_with_progress()
        found, _ = local_server.start(detach=True)
    except (local_store.PullError, local_server.LocalUnavailable) as error:
        _fail(str(error))
        return
    click.echo(
        f"serving {found.model} at {found.base_url} (pid {found.pid}); `gaffer local stop` ends it"
    )


@local.command(name="stop")
def local_stop() -> None:
    """Stop the server `gaffer local start` left running."""
    click.echo("stopped" if local_server.stop_running() else "no local server was running")


@local.command(name="status")
def local_status() -> None:
    """Whether the model is pulled and the server running."""
    model = local_store.QWEN_CODER_1_5B
    pulled = local_store.is_pulled()
    click.echo(
        f"model   {model.name}: {'pulled, ' + str(local_store.model_path()) if pulled else 'not pulled (gaffer local pull)'}"
    )
    found = local_server.running()
    click.echo(
        f"server  {'running at ' + found.base_url + f' (pid {found.pid})' if found else 'not running'}"
    )


@main.group()
def sandbox() -> None:
    """The Docker sandbox that code-editing and shell workers run in."""


@sandbox.command()
@click.option(
    "--profile",
    "profile_name",
    default="coder",
    show_default=True,
    help="Whose container to check.",
)
@click.option(
    "--sandbox-uid", type=int, help="Run the container as this uid (default: the workspace owner)."
)
def doctor(profile_name: str, sandbox_uid: int | None) -> None:
    """Show the container's mounts, user, network, limits and image, and run canary probes."""
    workspace = Path.cwd().resolve()
    workspace_trust = trust_view.evaluate(workspace)
    try:
        profiles = load_profiles(search_path(), BUILTIN_TOOLS, workspace_trust.sources("profile"))
    except ProfileError as error:
        _fail(str(error))
    profile = profiles.get(profile_name)
    if profile is None or profile.sandbox != "docker":
        _fail(f"{profile_name!r} is not a docker profile; try --profile coder")
        return
    try:
        protected = guard.survey(workspace, unshare=False).mounts
        spec = container_spec(workspace, profile.docker, sandbox_uid, protected)
        for line in doctor_checks.describe(spec, workspace_trust):
            click.echo(line)
        probes = doctor_checks.run_probes(workspace, profile.docker, sandbox_uid)
    except SandboxUnavailable as error:
        _fail(str(error))
        return
    for probe in probes:
        click.echo(f"{'PASS' if probe.ok else 'FAIL'}  {probe.name} ({probe.detail})")
    sys.exit(EXIT_OK if all(p.ok for p in probes) else EXIT_ERROR)


def _log_dir(log_dir: Path | None) -> Path:
    workspace = Path.cwd().resolve()
    try:
        config = settings.load({"log_dir": log_dir}, trust_view.evaluate(workspace).config())
        return config.logs_in(workspace)
    except settings.ConfigError as error:
        _fail(str(error))
        raise


@main.command()
@click.argument("run_ref", required=False)
@click.option(
    "--log-dir", type=click.Path(path_type=Path), help="Where run logs are [env GAFFER_LOG_DIR]."
)
def logs(run_ref: str | None, log_dir: Path | None) -> None:
    """List runs, or show RUN (an id, a prefix of one, `last`, or a .jsonl path) step by step."""
    directory = _log_dir(log_dir)
    console = Console(highlight=False, soft_wrap=True)
    if run_ref is None:
        runs = runlog.list_runs(directory) if directory.is_dir() else []
        if not runs:
            click.echo(f"no runs in {directory}")
            return
        for run_summary in runs:
            task = run_summary.task if len(run_summary.task) <= 60 else run_summary.task[:59] + "…"
            tokens = "?" if run_summary.tokens is None else str(run_summary.tokens)
            console.print(
                f"{run_summary.run_id}  {run_summary.started}  {run_summary.status:<11} "
                f"{tokens:>7} tok  {task}",
                markup=False,
            )
        return
    try:
        path = runlog.find_run(directory, run_ref)
    except runlog.RunNotFound as error:
        _fail(str(error))
        return
    for line in runlog.render(runlog.read_records(path)):
        console.print(line)


@main.command()
@click.argument("run_ref", default="last")
@click.option(
    "--log-dir", type=click.Path(path_type=Path), help="Where run logs are [env GAFFER_LOG_DIR]."
)
def stats(run_ref: str, log_dir: Path | None) -> None:
    """Tokens, time and tool calls of RUN (default: the last one)."""
    try:
        path = runlog.find_run(_log_dir(log_dir), run_ref)
    except runlog.RunNotFound as error:
        _fail(str(error))
        return
    console = Console(highlight=False)
    console.print(f"run {path.stem}", markup=False)
    for table in runlog.stats(runlog.read_records(path)):
        console.print(table)
