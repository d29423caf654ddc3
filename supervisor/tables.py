"""The tables `gaffer profiles`, `gaffer tools` and the chat's /profiles print: what each
profile and tool is, and who gets it."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from workers.assembly.profiles import Profile, is_parallel_safe
from workers.model import shown_url
from workers.tools.base import Tool


def profiles_table(
    profiles: dict[str, Profile], tools: dict[str, Tool[Any]], run_model: str = "the run's"
) -> Table:
    """Profiles with their model and endpoint, tools, sandbox, limits, parallel safety
    and source; `run_model`: what a profile that names no model gets."""
    read_only = {name: tool.read_only for name, tool in tools.items()}
    extensions = {n for n, t in tools.items() if t.kind == "extension"}
    table = Table(box=None, pad_edge=False)
    columns = ("profile", "model", "tools", "sandbox", "limits", "parallel-safe", "from")
    for column in columns:
        table.add_column(column, overflow="fold")
    for profile in profiles.values():
        limits = profile.limits
        model = profile.model or run_model
        if profile.api:
            model += f" ({profile.api})"
        if (endpoint := profile.endpoint) is not None:
            key = f", key from ${endpoint.api_key_env}" if endpoint.api_key_env else ""
            model += f" at {shown_url(endpoint.base_url)}{key}"
        table.add_row(
            profile.name,
            model,
            ", ".join(profile.tools),
            profile.sandbox,
            f"{limits.max_steps} steps"
            + (f", {limits.max_seconds:g}s" if limits.max_seconds else "")
            + (f", {limits.max_tokens} tok" if limits.max_tokens else ""),
            "yes" if is_parallel_safe(profile, read_only, extensions) else "no",
            profile.source,
        )
    return table


def tools_table(tools: dict[str, Tool[Any]], grants: dict[str, list[str]]) -> Table:
    """Every tool with its origin, whether it is read-only, and which profiles get it;
    the harness's own (`delegate`, `use_skill`, `find_symbol`) too, built per agent as
    they are."""
    table = Table(box=None, pad_edge=False)
    for column in ("tool", "origin", "read-only", "profiles"):
        table.add_column(column, overflow="fold")
    for name, tool in tools.items():
        table.add_row(
            name,
            tool.origin,
            "yes" if tool.read_only else "no",
            ", ".join(grants.get(name, [])) or "-",
        )
    if "delegate" not in tools:
        table.add_row("delegate", "harness", "no", ", ".join(grants.get("delegate", [])) or "-")
    if "use_skill" not in tools:
        table.add_row("use_skill", "harness", "yes", "every agent, once there are skills")
    if "find_symbol" not in tools:
        table.add_row("find_symbol", "harness", "yes", "every agent that reads files")
    return table
