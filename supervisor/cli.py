"""The `gaffer` command."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from supervisor import doctor as doctor_checks
from supervisor import runlog, settings
from supervisor.delegation import Ceiling
from supervisor.session import RunPlan, Session
from supervisor.view import TerminalView
from workers.model import Model
from workers.model.openai_client import OpenAIModel
from workers.outcome import Aborted, Failed, Finished, LimitHit, reason_of
from workers.profiles import ProfileError, is_parallel_safe, load_profiles, search_path
from workers.sandbox import SandboxUnavailable
from workers.sandbox.docker import container_spec
from workers.tools import BUILTIN_TOOLS

EXIT_OK, EXIT_ERROR, EXIT_LIMIT, EXIT_INTERRUPTED = 0, 1, 2, 130


def _fail(message: str, code: int = EXIT_ERROR) -> None:
    click.echo(f"gaffer: {message}", err=True)
    sys.exit(code)


@click.group(invoke_without_command=True)
@click.version_option(package_name="gaffer")
@click.pass_context
def main(ctx: click.Context) -> None:
    """gaffer: hand an LLM real work on a real repository, and see everything it did."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@main.command()
@click.argument("task")
@click.option("--model", help="Model name [env GAFFER_MODEL].")
@click.option("--base-url", help="OpenAI-compatible endpoint [env OPENAI_BASE_URL].")
@click.option("--api-key", help="API key [env OPENAI_API_KEY].")
@click.option(
    "--profile",
    "top",
    default="supervisor",
    show_default=True,
    help="Profile of the agent you talk to.",
)
@click.option(
    "--max-steps", type=int, help="Model calls the top agent may make (default: its profile's)."
)
@click.option(
    "--max-seconds", type=float, help="Wall-clock limit for the whole run, workers included."
)
@click.option(
    "--max-tokens", type=int, help="Prompt + completion tokens for the whole run, workers included."
)
@click.option("--max-parallel", type=int, help="Read-only workers at the same time (default 4).")
@click.option("--read-only", is_flag=True, help="Allow only read-only (parallel-safe) workers.")
@click.option(
    "--profiles", "allowed", help="Comma-separated profiles workers may use; default all."
)
@click.option(
    "--log-dir", type=click.Path(path_type=Path), help="Where run logs go [env GAFFER_LOG_DIR]."
)
@click.option(
    "--yes", is_flag=True, help="Approve host shell commands outside the read-only allowlist."
)
@click.option("--quiet", is_flag=True, help="Show nothing on stderr but the outcome.")
@click.option("--no-stream", is_flag=True, help="Ask for whole responses instead of streams.")
@click.option(
    "--no-verify", is_flag=True, help="Let final answers out without the verification gate."
)
@click.option("--context-window", type=int, help="The model's context window in tokens.")
@click.option("--sandbox-uid", type=int, help="Run sandbox containers as this uid.")
def run(
    task: str,
    top: str,
    read_only: bool,
    allowed: str | None,
    yes: bool,
    quiet: bool,
    no_stream: bool,
    no_verify: bool,
    **flags: Any,
) -> None:
    """Run TASK in the current directory; the final answer goes to stdout."""
    workspace = Path.cwd().resolve()
    if no_stream:
        flags["stream"] = False
    if no_verify:
        flags["verify"] = False
    plan_flags = {key: flags.pop(key) for key in ("max_steps", "max_seconds", "max_tokens")}
    try:
        config = settings.load(
            workspace, {**flags, **{k: v for k, v in plan_flags.items() if k != "max_steps"}}
        )
        profiles = load_profiles(search_path(workspace), BUILTIN_TOOLS)
    except (settings.ConfigError, ProfileError) as error:
        _fail(str(error))
    if top not in profiles:
        _fail(f"no profile {top!r}; `gaffer profiles` lists them")
    allowed_set = frozenset(p.strip() for p in allowed.split(",") if p.strip()) if allowed else None
    if allowed_set and (unknown := sorted(allowed_set - profiles.keys())):
        _fail(f"--profiles names unknown profile(s): {', '.join(unknown)}")
    plan = RunPlan(
        profiles=profiles,
        tools=dict(BUILTIN_TOOLS),
        make_model=_model_factory(config),
        top=top,
        max_steps=plan_flags["max_steps"],
        max_seconds=config.max_seconds,
        max_tokens=config.max_tokens,
        ceiling=Ceiling(
            read_only=read_only,
            profiles=allowed_set,
            max_parallel=config.max_parallel,
            max_depth=config.max_depth,
            max_workers=config.max_workers,
        ),
        approve=(lambda _c, _r: True) if yes else (lambda _c, _r: False),
        base_url=config.base_url,
        sandbox_uid=config.sandbox_uid,
        verify=config.verify,
        context_window=config.context_window,
    )
    session = Session(workspace, config.logs_in(workspace), [] if quiet else [TerminalView()])
    result = session.run(task, plan)
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
                )
            return models[name]

    return make


@main.command(name="profiles")
def list_profiles() -> None:
    """List the profiles: tools, sandbox, limits, parallel-safe or not, and where each came from."""
    workspace = Path.cwd().resolve()
    try:
        profiles = load_profiles(search_path(workspace), BUILTIN_TOOLS)
    except ProfileError as error:
        _fail(str(error))
    read_only = {name: tool.read_only for name, tool in BUILTIN_TOOLS.items()}
    table = Table(box=None, pad_edge=False)
    for column in ("profile", "tools", "sandbox", "limits", "parallel-safe", "from"):
        table.add_column(column, overflow="fold")
    for profile in profiles.values():
        limits = profile.limits
        table.add_row(
            profile.name,
            ", ".join(profile.tools),
            profile.sandbox,
            f"{limits.max_steps} steps"
            + (f", {limits.max_seconds:g}s" if limits.max_seconds else "")
            + (f", {limits.max_tokens} tok" if limits.max_tokens else ""),
            "yes" if is_parallel_safe(profile, read_only) else "no",
            profile.source,
        )
    Console(highlight=False, soft_wrap=True).print(table)


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
    try:
        profiles = load_profiles(search_path(workspace), BUILTIN_TOOLS)
    except ProfileError as error:
        _fail(str(error))
    profile = profiles.get(profile_name)
    if profile is None or profile.sandbox != "docker":
        _fail(f"{profile_name!r} is not a docker profile; try --profile coder")
        return
    try:
        for line in doctor_checks.describe(container_spec(workspace, profile.docker, sandbox_uid)):
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
        return settings.load(workspace, {"log_dir": log_dir}).logs_in(workspace)
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
