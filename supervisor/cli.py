"""The `gaffer` command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from supervisor import runlog, settings
from supervisor.session import Session
from supervisor.view import TerminalView
from workers.limits import Limits
from workers.model.openai_client import OpenAIModel
from workers.outcome import Aborted, Failed, Finished, LimitHit, reason_of
from workers.tools.base import Approver

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
@click.option("--max-steps", type=int, help="Model calls the agent may make (default 30).")
@click.option("--max-seconds", type=float, help="Wall-clock limit for the run.")
@click.option("--max-tokens", type=int, help="Prompt + completion tokens for the whole run.")
@click.option(
    "--log-dir", type=click.Path(path_type=Path), help="Where run logs go [env GAFFER_LOG_DIR]."
)
@click.option(
    "--yes", is_flag=True, help="Approve host shell commands outside the read-only allowlist."
)
@click.option("--quiet", is_flag=True, help="Show nothing on stderr but the outcome.")
@click.option("--no-stream", is_flag=True, help="Ask for whole responses instead of streams.")
def run(task: str, yes: bool, quiet: bool, no_stream: bool, **flags: Any) -> None:
    """Run TASK in the current directory; the final answer goes to stdout."""
    workspace = Path.cwd().resolve()
    if no_stream:
        flags["stream"] = False
    try:
        config = settings.load(workspace, flags)
    except settings.ConfigError as error:
        _fail(str(error))
    model = OpenAIModel(
        model=config.model,
        base_url=config.base_url,
        api_key=config.api_key,
        max_attempts=config.max_attempts,
        request_timeout=config.request_timeout,
        stream=config.stream,
    )
    limits = Limits(config.max_steps, config.max_seconds, config.max_tokens)
    approve: Approver = (lambda _c, _r: True) if yes else (lambda _c, _r: False)
    session = Session(workspace, config.logs_in(workspace), [] if quiet else [TerminalView()])
    result = session.run(task, model, limits, approve=approve, base_url=config.base_url)
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
