"""`gaffer rules`: the permission rules a run here would hold every agent to, each with
the file it came from, and the mode; `gaffer rules test CMD` says what would happen to a
call, on this machine and in a worker's container, judged by the same code a run uses
(workers/permissions/gate.py) before anyone would be asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from supervisor.exits import EXIT_USAGE, fail
from supervisor.terminal import echo, one_line
from workers.tools.git_paths import workspace_for

MODES = ("ask-edits", "plan", "auto", "full-auto")


@click.group(invoke_without_command=True)
@click.pass_context
def rules(ctx: click.Context) -> None:
    """The permission rules, hooks and mode a run here uses, and where each came from."""
    if ctx.invoked_subcommand is not None:
        return
    config, notices, _ = _loaded(None)
    rule_set = config.rule_set()
    echo(f"mode: {config.mode}")
    if not rule_set:
        echo("no rules: [permissions] allow / ask / deny in ~/.config/gaffer/config.toml or a")
        echo("trusted .gaffer/config.toml add them (docs/rules-and-hooks.md)")
    for action in ("deny", "ask", "allow"):
        for rule in rule_set.of(action):
            echo(f"{action:<6} {one_line(rule.text)}  ({one_line(rule.source)})")
    for hook in config.hook_set().hooks:  # what runs beside the rules, and from where
        echo(f"hook   {hook.moment}: {one_line(hook.command)}  ({one_line(hook.source)})")
    for line in notices:
        echo(f"not applied: {line}")


@rules.command(name="test")
@click.argument("what")
@click.option(
    "--tool",
    default="run_shell",
    show_default=True,
    help="The tool called: WHAT is the command for run_shell, the path for a file tool, "
    "the profile for delegate.",
)
@click.option("--mode", type=click.Choice(MODES), default=None, help="Judge in this mode.")
@click.option("--yes", is_flag=True, help="As a run with --yes would.")
def test_call(what: str, tool: str, mode: str | None, yes: bool) -> None:
    """What a run here would do with a call: run it, ask first, or refuse it (and why)."""
    from workers.permissions.gate import Actor, Permissions

    config, notices, hosts = _loaded(mode)
    permissions = Permissions(config.rule_set(), config.mode, None, yes=yes)
    key = {"run_shell": "command", "delegate": "profile"}.get(tool, "path")
    arguments: dict[str, Any] = {key: what}
    workspace = workspace_for(Path.cwd())
    for in_container, who in ((False, hosts[0]), (True, hosts[1])):
        if not who:
            continue
        actor = Actor(
            agent_id="supervisor",
            profile=who[0],
            in_container=in_container,
            read_only_tools=frozenset(
                {"read_file", "list_dir", "grep", "find_files", "find_symbol"}
            ),
            workspace=workspace,
            container_root="/workspace" if in_container else None,
        )
        verdict = permissions.verdict(actor, tool, arguments)
        where = "in a container" if in_container else "on this machine"
        said = {"allow": "runs", "ask": "asks first", "deny": "refused"}[verdict.action]
        reason = f": {verdict.why}" if verdict.why else ""
        echo(f"{where} ({', '.join(who)}): {said}{one_line(reason)}")
        if verdict.action == "ask" and verdict.unasked:
            echo(
                f"  with no terminal to ask at, refused; to let it run, {one_line(verdict.unasked)}"
            )
    for line in notices:
        echo(f"not applied: {line}")


def _loaded(mode: str | None) -> tuple[Any, list[str], tuple[list[str], list[str]]]:
    """The settings a run here would have, what of the workspace's is not used (and
    why), and the profiles that work on this machine and in containers."""
    from supervisor import settings, trust_view
    from workers.assembly.profiles import ProfileError, load_profiles, search_path

    workspace_trust = trust_view.evaluate(workspace_for(Path.cwd()))
    try:
        config = settings.load({"mode": mode}, workspace_trust.config())
        profiles = load_profiles(search_path(), None, workspace_trust.sources("profile"))
    except settings.ConfigError as error:
        fail(str(error), EXIT_USAGE if error.usage else 1)
    except ProfileError as error:
        fail(str(error))
    notices = [n for n in workspace_trust.notices() if "config" in n]
    host = sorted(name for name, p in profiles.items() if p.sandbox != "docker")
    boxed = sorted(name for name, p in profiles.items() if p.sandbox == "docker")
    return config, notices, (host, boxed)
