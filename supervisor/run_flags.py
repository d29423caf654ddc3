"""The options `gaffer run` and `gaffer chat` share: every setting that is a flag, made
from its field in `Settings` (so a setting and its flag cannot drift apart), then the
run's ceiling, the top agent's profile and what the run may do without asking."""

from __future__ import annotations

import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from supervisor import settings

# workers.trust.TRUST_ENV, written out: importing workers.trust would load every tool.
TRUST_ENV = "GAFFER_TRUST_WORKSPACE"


def _setting_option(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The flag of one setting, from its field: `--max-steps` for max_steps, its help the
    field's first sentence, its environment variable named; a setting on by default is
    turned off with `--no-…`, one off by default turned on by its flag alone. Unset, a flag leaves the setting to config and environment."""
    field = settings.Settings.model_fields[name]
    flag = "--" + name.replace("_", "-")
    help_text = " ".join((field.description or "").split())
    if var := settings.ENV_VARS.get(name):
        help_text += f" [env {var}]"
    if field.annotation is bool and field.default is False:
        return click.option(flag, name, flag_value=True, default=None, help=help_text)
    if field.annotation is bool:
        off = f"--no-{name.replace('_', '-')}"
        lowered = help_text[:1].lower() + help_text[1:]
        return click.option(
            off, name, flag_value=False, default=None, help=f"Turn off (on by default): {lowered}"
        )
    if typing.get_origin(field.annotation) is typing.Literal:  # one of a few words
        choices = [str(value) for value in typing.get_args(field.annotation)]
        return click.option(flag, name, type=click.Choice(choices), default=None, help=help_text)
    kind = next(
        t for t in typing.get_args(field.annotation) or (field.annotation,) if t is not type(None)
    )
    click_type = click.Path(path_type=Path) if kind is Path else kind
    return click.option(flag, name, type=click_type, default=None, help=help_text)


def run_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options `run` and `chat` share: the settings that are flags, then the run's
    ceiling, the top agent's profile and what this run may do without asking."""
    options = [
        *(_setting_option(name) for name in settings.FLAGS),
        click.option(
            "--profile",
            "top",
            default=None,
            help="Profile of the agent you talk to (default: supervisor; dispatcher, which "
            "hands every piece to workers, on the bundled local model).",
        ),
        click.option(
            "--read-only", is_flag=True, help="Allow only read-only (parallel-safe) workers."
        ),
        click.option(
            "--profiles", "allowed", help="Comma-separated profiles workers may use; default all."
        ),
        click.option(
            "--yes",
            is_flag=True,
            help="Approve host shell commands outside the read-only allowlist, and fetch "
            "the bundled local model without asking.",
        ),
        click.option(
            "--local", is_flag=True, help="Use the local model even when an endpoint is set."
        ),
        click.option(
            "--trust-workspace",
            is_flag=True,
            help="Use this workspace's MCP servers, plugins, profiles, config and skills for "
            f"this run without `gaffer trust` [env {TRUST_ENV}=1].",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command
