"""The `gaffer` command: its options and subcommands, nothing heavier.

Each command imports what it needs when it runs (the model client, Docker, MCP, rich
tables), so `gaffer --help` stays fast. Running a task or a conversation is set up in
supervisor/run_setup.py; the options that are settings are made from the `Settings`
model, so a setting and its flag cannot drift apart.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any, cast

import click

from supervisor import cluster_commands, history, rules_commands, timeline_commands
from supervisor.exits import EXIT_ERROR, EXIT_USAGE, fail, log_dir_here, results_as_json
from supervisor.local import commands as local_commands
from supervisor.run_flags import run_options
from supervisor.terminal import echo
from workers.tools.git_paths import workspace_for

# A mistyped flag is a usage error (sysexits' EX_USAGE), never the 2 of "a limit stopped it".
click.UsageError.exit_code = EXIT_USAGE


def entry() -> None:
    """The `gaffer` command. `gaffer -p TASK` is `gaffer run TASK`, as in other agents'
    CLIs; `--step=all` is read as the hidden `--step-all`, since click takes no value
    after a flag that also stands alone (`--step TASK`). Asked for JSON, a usage or
    setup error comes as a result object too, so a script's `jq` gets one."""
    args = ["--step-all" if arg == "--step=all" else arg for arg in sys.argv[1:]]
    if args[:1] in (["-p"], ["--print"]):
        args[0] = "run"
    results_as_json(_asks_for_json(args))
    try:
        code = main(args=args, standalone_mode=False)
    except click.ClickException as error:
        fail(error.format_message(), error.exit_code)
    except click.Abort:
        fail("aborted", EXIT_ERROR)
    sys.exit(code if isinstance(code, int) else 0)


def _asks_for_json(args: list[str]) -> bool:
    formats = {"--output-format=json", "--output-format=stream-json"}
    pairs = zip(args, [*args[1:], ""], strict=False)
    return any(a in formats or (a == "--output-format" and b != "text") for a, b in pairs)


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gaffer")
@click.pass_context
def main(ctx: click.Context) -> None:
    """gaffer: hand an LLM real work on a real repository, and see everything it did.

    `gaffer` alone opens a chat; `gaffer run "TASK"` runs one task and exits.
    """
    from workers.processes import hide_environment_secrets
    from workers.tools.shell import looks_secret

    # The commands gaffer runs must not find its API key in /proc/<gaffer's pid>/environ.
    hide_environment_secrets(looks_secret)
    _reap_leftovers_meanwhile()
    if ctx.invoked_subcommand is None:
        ctx.invoke(chat)


def _reap_leftovers_meanwhile() -> None:
    """Remove containers a killed run left behind, beside whatever this command does
    (waited for at exit, at most 2 s)."""
    import atexit
    import threading

    def reap() -> None:
        from workers.sandbox.leftovers import remove_leftovers_if_reachable

        if removed := remove_leftovers_if_reachable():
            echo(
                f"gaffer: removed {len(removed)} container(s) left by runs that were killed: "
                + ", ".join(removed),
                err=True,
            )

    reaper = threading.Thread(target=reap, name="gaffer-reaper", daemon=True)
    reaper.start()
    atexit.register(reaper.join, 2)  # a daemon that does not answer never holds gaffer long


@main.command()
@click.argument("task")
@run_options
@click.option("--quiet", is_flag=True, help="Show nothing on stderr but the outcome.")
@click.option(
    "--resume",
    "resume_ref",
    help="Continue the conversation of an earlier run (an id, a prefix, `last`).",
)
@click.option(
    "-c",
    "--continue",
    "continue_last",
    is_flag=True,
    help="Continue the last conversation in this workspace (--resume last).",
)
@click.option(
    "--step",
    is_flag=True,
    help="Ask before each tool call of the top agent (--step=all: of workers too): run it, "
    "skip it, edit its arguments, or stop the run.",
)
@click.option("--step-all", is_flag=True, hidden=True)
@click.option(
    "--output-format",
    "output",
    type=click.Choice(["text", "json", "stream-json"]),
    default="text",
    show_default=True,
    help="stdout: the answer; one JSON object at the end; or every event as a JSON line.",
)
def run(
    task: str,
    quiet: bool,
    resume_ref: str | None,
    continue_last: bool,
    output: str,
    step: bool,
    step_all: bool,
    **flags: Any,
) -> None:
    """Run TASK in the current directory; the final answer goes to stdout. TASK `-` is
    read from stdin; with a TASK, piped stdin is added to it as context."""
    from supervisor.run_output import JsonLines, OutputFormat
    from supervisor.run_setup import run_task, set_up
    from supervisor.task_input import task_from

    step = step or step_all
    if step and not sys.stdin.isatty():
        fail("--step asks at the terminal, and stdin is not one: run it in a terminal", EXIT_USAGE)
    task = task_from(task)
    from supervisor.view import TerminalView

    workspace = workspace_for(Path.cwd())
    view = None if quiet else TerminalView()
    subscribers: list[Any] = [] if view is None else [view]
    if output == "stream-json":
        subscribers.append(JsonLines())
    asker = None
    if sys.stdin.isatty():  # a terminal to ask at
        from supervisor.asking import terminal_asker
        from supervisor.view import stderr_console

        asker = terminal_asker(
            view.console if view else stderr_console(),
            pause=view.paused if view else contextlib.nullcontext,
        )
    with contextlib.ExitStack() as stack:
        session, plan = set_up(workspace, flags, asker, subscribers, stack)
        plan.task_mode = True
        if view is not None:
            view.prices = plan.prices
        if step:
            from supervisor.step_mode import for_run

            plan.stepper, plan.step_workers = for_run(view, session), step_all
        run_task(
            session,
            plan,
            task,
            resume_ref or ("last" if continue_last else None),
            cast(OutputFormat, output),
            quiet,
            shown=lambda: view.shown_reply if view is not None else "",
        )


@main.command()
@run_options
@click.option("--quiet", is_flag=True, help="Show the answers only, not each step.")
@click.option(
    "--resume",
    "resume_ref",
    help="Start from the conversation of an earlier run (an id, a prefix, `last`).",
)
@click.option(
    "-c",
    "--continue",
    "continue_last",
    is_flag=True,
    help="Start from the last conversation in this workspace (--resume last).",
)
def chat(quiet: bool, resume_ref: str | None, continue_last: bool, **flags: Any) -> None:
    """A conversation in the current directory: line editing, history, slash commands (/help)."""
    from supervisor import run_setup
    from supervisor.asking import terminal_asker
    from supervisor.view import TerminalView, stderr_console

    workspace = workspace_for(Path.cwd())
    console = stderr_console()
    view: list[Any] = [] if quiet else [TerminalView(console)]
    with contextlib.ExitStack() as stack:
        pause = view[0].paused if view else contextlib.nullcontext
        asker = terminal_asker(console, pause=pause)
        session, plan = run_setup.set_up(workspace, flags, asker, view, stack)
        for shown in view:
            shown.prices = plan.prices
        resume_ref = resume_ref or ("last" if continue_last else None)
        run_setup.chat(session, plan, workspace, console, resume_ref, quiet)


@main.command(name="profiles")
def list_profiles() -> None:
    """List the profiles: model and endpoint, tools, sandbox, limits, parallel-safe or
    not, and where each came from."""
    from supervisor import trust_view
    from supervisor.tables import profiles_table
    from supervisor.terminal import console as safe_console
    from workers.assembly.profiles import ProfileError, load_profiles, search_path
    from workers.tools import BUILTIN_TOOLS

    workspace = workspace_for(Path.cwd())
    workspace_trust = trust_view.evaluate(workspace)
    try:
        profiles = load_profiles(search_path(), BUILTIN_TOOLS, workspace_trust.sources("profile"))
    except ProfileError as error:
        fail(str(error))
    safe_console(soft_wrap=True).print(profiles_table(profiles, BUILTIN_TOOLS))
    trust_view.print_skipped(workspace_trust, ("profile",))


@main.command(name="tools")
def list_tools() -> None:
    """List every tool: built-in, plugin or MCP, read-only or not, and which profiles get it."""
    from supervisor import trust_view
    from supervisor.tables import tools_table
    from supervisor.terminal import console as safe_console
    from supervisor.view import TerminalView
    from workers.assembly.profiles import HARNESS_TOOLS, ProfileError, load_profiles, search_path
    from workers.assembly.specs import resolve
    from workers.extensions import load_extensions
    from workers.log.events import Emitter
    from workers.tools import BUILTIN_TOOLS
    from workers.tools.base import Tool

    workspace = workspace_for(Path.cwd())
    workspace_trust = trust_view.evaluate(workspace)
    events = Emitter([TerminalView()]).bind(session_id="tools")
    extensions = load_extensions(
        workspace_trust,
        events,
        taken=set(BUILTIN_TOOLS) | HARNESS_TOOLS,
        log_dir=log_dir_here(None),
    )
    try:
        tools = {**BUILTIN_TOOLS, **extensions.tools}
        profiles = load_profiles(search_path(), tools, workspace_trust.sources("profile"))
        grants: dict[str, list[str]] = {}
        for spec in resolve(profiles, tools).values():
            names = [*spec.tools, *(["delegate"] if spec.may_delegate else [])]
            names += ["use_skill"] if extensions.skills else []
            for name in names:
                grants.setdefault(name, []).append(spec.name)
        listed: dict[str, Tool[Any]] = dict(tools)
        if extensions.skills and (use_skill := extensions.use_skill()) is not None:
            listed["use_skill"] = use_skill
        safe_console(soft_wrap=True).print(tools_table(listed, grants))
    except ProfileError as error:
        fail(str(error))
    finally:
        extensions.close()
    trust_view.print_skipped(workspace_trust, ("plugin", "mcp", "skill", "profile"))


@main.command(name="trust")
@click.option("--yes", is_flag=True, help="Trust what is shown without asking.")
@click.option("--revoke", is_flag=True, help="Forget every approval for this workspace.")
def trust_command(yes: bool, revoke: bool) -> None:
    """Review what this workspace would have gaffer run or obey, and trust it.

    MCP servers in .mcp.json, plugins in .gaffer/tools, profiles in .gaffer/profiles,
    .gaffer/config.toml and skills in .gaffer/skills are used only once trusted; a
    change to any of them asks again. Approvals live in your own config folder.
    """
    from supervisor import trust_view

    trust_view.review_and_approve(workspace_for(Path.cwd()), yes=yes, revoke=revoke)


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
    from supervisor import doctor as doctor_checks

    sys.exit(doctor_checks.check_here(workspace_for(Path.cwd()), profile_name, sandbox_uid))


@main.command()
@click.argument("run_ref", required=False)
@click.option(
    "--log-dir", type=click.Path(path_type=Path), help="Where run logs are [env GAFFER_LOG_DIR]."
)
def logs(run_ref: str | None, log_dir: Path | None) -> None:
    """List runs, or show RUN (an id, a prefix of one, `last`, or a .jsonl path) step by step."""
    from supervisor import runlog
    from supervisor.terminal import console as safe_console

    directory = log_dir_here(log_dir)
    console = safe_console(soft_wrap=True)
    if run_ref is None:
        runs = runlog.list_runs(directory) if directory.is_dir() else []
        if not runs:
            echo(f"no runs in {directory}")
            return
        for run_summary in runs:
            task = run_summary.task if len(run_summary.task) <= 60 else run_summary.task[:59] + "…"
            tokens = "?" if run_summary.tokens is None else str(run_summary.tokens)
            console.print(
                f"{run_summary.run_id}  {run_summary.started}  {run_summary.status:<21} "
                f"{tokens:>7} tok  {task}",
                markup=False,
            )
        return
    try:
        records = runlog.read_records(runlog.find_run(directory, run_ref))
    except (runlog.RunNotFound, runlog.RunUnreadable) as error:
        fail(str(error))
    from supervisor.costs import dollars, prices_here, run_cost

    for line in runlog.render(records, dollars(run_cost(records, prices_here()))):
        console.print(line)


@main.command()
@click.argument("run_ref", default="last")
@click.option(
    "--log-dir", type=click.Path(path_type=Path), help="Where run logs are [env GAFFER_LOG_DIR]."
)
def stats(run_ref: str, log_dir: Path | None) -> None:
    """Tokens, time and tool calls of RUN (default: the last one)."""
    from supervisor import run_stats, runlog
    from supervisor.terminal import console as safe_console

    try:
        path = runlog.find_run(log_dir_here(log_dir), run_ref)
        records = runlog.read_records(path)
    except (runlog.RunNotFound, runlog.RunUnreadable) as error:
        fail(str(error))
    # Piped, a table is as wide as it needs: a script reads whole cells, never "superv…".
    console = safe_console(width=None if sys.stdout.isatty() else 200)
    console.print(f"run {path.stem}", markup=False)
    from supervisor.costs import prices_here

    for table in run_stats.stats(records, prices=prices_here()):
        console.print(table)


main.add_command(cluster_commands.cluster)
main.add_command(timeline_commands.view)
main.add_command(history.diff)
main.add_command(local_commands.local)
main.add_command(history.undo)
main.add_command(history.redo)
main.add_command(rules_commands.rules)
