"""What the commands say about workspace trust, and the review `gaffer trust` shows."""

from __future__ import annotations

import contextlib
import json
import sys
import tomllib
from pathlib import Path

from supervisor.terminal import confirm, echo, one_line
from workers import trust
from workers.assembly.profiles import (
    Profile,
    ProfileError,
    parse_profile,
    search_path,
    widening,
)
from workers.log.events import Emitter
from workers.log.schema import Boundary
from workers.trust import Item, TrustStore, WorkspaceTrust, read_folder

# A name past this is cut in the review (what it runs, on the lines below, is not).
MAX_NAME_SHOWN = 200

_STATE_WORDS = {"trusted": "trusted", "new": "NEW", "changed": "CHANGED"}


def evaluate(workspace: Path, trust_flag: bool = False) -> WorkspaceTrust:
    """The workspace's trust for this command: approvals, plus --trust-workspace or its env."""
    return trust.evaluate(workspace, trust_all=trust_flag or trust.trust_all_from_env())


def report(workspace_trust: WorkspaceTrust, events: Emitter) -> None:
    """One `boundary` line per thing the run will not use (the terminal view prints it)."""
    log = events.bind(agent_id="trust")
    for item in workspace_trust.skipped():
        # The terminal view prints the message as one line; a name of many lines would
        # push the run's own lines out of view.
        message = one_line(workspace_trust.notice(item))
        log.emit(Boundary(action="skipped", what=item.kind, path=item.key, message=message))
    for refused in workspace_trust.refused:
        log.emit(
            Boundary(
                action="refused",
                what="workspace file",
                path=refused.key,
                message=one_line(f"skipped {refused.key}: {refused.reason}"),
            )
        )


def review(workspace_trust: WorkspaceTrust) -> list[str]:
    """Each item: its state, what it would run, and how a profile widens the built-in or
    user profile it overrides. Every line is one line whatever a name holds: a name of
    many lines, or a forged item in it, could push the real items out of view."""
    base = _base_profiles()
    # The workspace's profiles load in this order, each over the ones before it (a second
    # file of a name changes the first's keys): each is shown as it would be loaded.
    loaded = dict(base)
    lines = []
    for item in workspace_trust.items:
        lines.append(
            f"  {_STATE_WORDS[item.state]:<8} {item.kind:<8} {one_line(item.key, MAX_NAME_SHOWN)}"
        )
        for detail in _details(item, base, loaded):
            lines.append(f"           {one_line(detail)}")
    for refused in workspace_trust.refused:
        lines.append(f"  REFUSED  {'':<8} {one_line(refused.key, MAX_NAME_SHOWN)}")
        lines.append(f"           never used, trusted or not: {one_line(refused.reason)}")
    return lines


def _details(item: Item, base: dict[str, Profile], loaded: dict[str, Profile]) -> list[str]:
    """What trusting `item` would bring; a profile's against the built-in or user profile
    of its name (`base`), as it loads over the workspace's earlier ones (`loaded`)."""
    if item.kind == "config":
        return _config_details(item)
    if item.kind != "profile":
        return [item.runs] if item.kind in ("mcp", "plugin") else []
    try:
        profile = parse_profile(item.source, _ANY_TOOL, loaded, from_workspace=True, ceiling=base)
    except ProfileError as error:
        return [f"does not load: {error}"]
    loaded[profile.name] = profile
    overrides = base.get(profile.name)
    # Every option of its container, not only those it changes: "runs in Docker" alone
    # hid a network opened to the host.
    where = (
        f"in Docker ({profile.docker.shown()})" if profile.sandbox == "docker" else "on the host"
    )
    details = [
        f"profile {profile.name!r}: tools {', '.join(profile.tools)}; runs {where}"
        + (f"; overrides the {profile.name!r} profile" if overrides else "")
    ]
    details += [f"WIDENS {profile.name!r}: {wider}" for wider in widening(profile, overrides)]
    if overrides is not None:
        details += [
            f"changes {profile.name!r}: {change}" for change in _changed(profile, overrides)
        ]
    return details


def _changed(profile: Profile, base: Profile) -> list[str]:
    """What else an override changes: its instructions, its limits, its model."""
    changes = []
    if profile.system_prompt != base.system_prompt:
        changes.append("its instructions (system_prompt)")
    if profile.description != base.description:
        changes.append("its description, which the supervisor chooses workers by")
    for key, value in profile.limits.model_dump().items():
        if value != (was := getattr(base.limits, key)):
            changes.append(f"limits.{key} = {value} (was {was})")
    if profile.model != base.model:
        changes.append(f"model {profile.model!r} (was {base.model or 'the run’s model'})")
    return changes


def _config_details(item: Item) -> list[str]:
    """The keys a workspace's config sets, each with its value: what it changes of the
    user's own settings (verify, test_runners, limits) is read before it is trusted."""
    try:
        data = tomllib.loads(item.source.data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        return [f"does not load: {error}"]
    lines = []
    for key, value in data.items():
        if key == "permissions" and isinstance(value, dict):  # each rule whole, on its line
            lines += [
                f"{action} rule {one_line(str(rule))}"
                for action in ("deny", "ask", "allow")
                for rule in value.get(action) or []
            ]
        elif key == "hooks" and isinstance(value, dict):
            lines += [
                _hook_line(moment, entry)
                for moment, entries in value.items()
                for entry in (entries if isinstance(entries, list) else [entries])
            ]
        else:
            lines.append(f"sets {key} = {_short(json.dumps(value, default=str))}")
    return lines


def _hook_line(moment: str, entry: object) -> str:
    """A hook as the user must judge it: its whole command, what it is given, and where
    it runs."""
    if not isinstance(entry, dict):
        return f"{one_line(moment)} hook: {_short(json.dumps(entry, default=str))}"
    line = f"{one_line(moment)} hook: {one_line(str(entry.get('command')))}"
    if entry.get("env"):
        line += f" (given {one_line(', '.join(map(str, entry['env'])))})"
    if entry.get("in_sandbox"):
        line += " (in the worker's sandbox)"
    return line


def _short(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _base_profiles() -> dict[str, Profile]:
    profiles: dict[str, Profile] = {}
    for folder in search_path():
        for source in read_folder(folder, "*.toml"):
            with contextlib.suppress(ProfileError):
                profile = parse_profile(source, _ANY_TOOL, profiles)
                profiles[profile.name] = profile
    return profiles


class _AnyTool(set[str]):
    """Lets a profile be parsed for review whatever tools it names."""

    def __contains__(self, _name: object) -> bool:
        return True


_ANY_TOOL = _AnyTool()


def review_and_approve(workspace: Path, *, yes: bool, revoke: bool) -> None:
    """`gaffer trust`: show what the workspace would have gaffer run or obey, and trust
    it as it is now (asked at a terminal, or --yes); --revoke forgets every approval."""
    store = TrustStore(trust.default_store())
    shown = one_line(str(workspace))
    if revoke:
        found = store.revoke(workspace)
        echo(f"{'forgot the approvals for' if found else 'nothing was trusted in'} {shown}")
        return
    workspace_trust = trust.evaluate(workspace)
    if not workspace_trust.items and not workspace_trust.refused:
        echo(
            f"nothing in {shown} asks for trust: no .mcp.json, and no plugins, profiles, config or skills in .gaffer/"
        )
        return
    echo(f"{shown} has {len(workspace_trust.items)} item(s) gaffer would run or obey:")
    for line in review(workspace_trust):
        echo(line)
    pending = [i for i in workspace_trust.items if i.state != "trusted"]
    if not pending:
        echo("everything here is trusted as it is now")
        return
    if not yes:
        if not sys.stdin.isatty():
            echo(
                f"not trusted yet: run `gaffer trust --yes` to trust the {len(pending)} new or changed item(s)"
            )
            return
        if not confirm(
            f"trust the {len(pending)} new or changed item(s) as they are now?", default=False
        ):
            echo("nothing trusted")
            return
    store.approve(workspace, workspace_trust.items)
    echo(
        f"trusted {len(workspace_trust.items)} item(s) of {shown}; a change to any of them asks again"
    )


def print_skipped(workspace_trust: WorkspaceTrust, kinds: tuple[str, ...]) -> None:
    """The workspace's part in the listing: what of it was trusted, and what not loaded."""
    items = [i for i in workspace_trust.items if i.kind in kinds]
    if not items:
        return
    skipped = [i for i in items if not workspace_trust.allowed(i)]
    how = "for this run (--trust-workspace)" if workspace_trust.trust_all else "by `gaffer trust`"
    echo(
        f"\nworkspace: {len(items) - len(skipped)} item(s) trusted {how}, {len(skipped)} not loaded"
    )
    for item in skipped:
        echo(f"not loaded: {one_line(workspace_trust.notice(item).removeprefix('skipped '))}")
