"""What the commands say about workspace trust, and the review `gaffer trust` shows."""

from __future__ import annotations

import contextlib
from pathlib import Path

from workers import trust
from workers.events import Emitter
from workers.profiles import Profile, ProfileError, parse_profile, search_path, widening
from workers.trust import Item, WorkspaceTrust, read_folder

_STATE_WORDS = {"trusted": "trusted", "new": "NEW", "changed": "CHANGED"}


def evaluate(workspace: Path, trust_flag: bool = False) -> WorkspaceTrust:
    """The workspace's trust for this command: approvals, plus --trust-workspace or its env."""
    return trust.evaluate(workspace, trust_all=trust_flag or trust.trust_all_from_env())


def report(workspace_trust: WorkspaceTrust, events: Emitter) -> None:
    """One `boundary` line per thing the run will not use (the terminal view prints it)."""
    log = events.bind(agent_id="trust")
    for item in workspace_trust.skipped():
        message = workspace_trust.notice(item)
        log.emit("boundary", action="skipped", what=item.kind, path=item.key, message=message)
    for refused in workspace_trust.refused:
        log.emit(
            "boundary",
            action="refused",
            what="workspace file",
            path=refused.key,
            message=f"skipped {refused.key}: {refused.reason}",
        )


def review(workspace_trust: WorkspaceTrust) -> list[str]:
    """Each item: its state, what it would run, and how a profile widens the built-in or
    user profile it overrides."""
    base = _base_profiles()
    lines = []
    for item in workspace_trust.items:
        lines.append(f"  {_STATE_WORDS[item.state]:<8} {item.kind:<8} {item.key}")
        for detail in _details(item, base):
            lines.append(f"           {detail}")
    for refused in workspace_trust.refused:
        lines.append(f"  REFUSED  {'':<8} {refused.key}")
        lines.append(f"           never used, trusted or not: {refused.reason}")
    return lines


def _details(item: Item, base: dict[str, Profile]) -> list[str]:
    if item.kind != "profile":
        return [item.runs] if item.kind in ("mcp", "plugin") else []
    try:
        profile = parse_profile(item.source, _ANY_TOOL)
    except ProfileError as error:
        return [f"does not load: {error}"]
    overrides = base.get(profile.name)
    where = "in Docker" if profile.sandbox == "docker" else "on the host"
    details = [
        f"profile {profile.name!r}: tools {', '.join(profile.tools)}; runs {where}"
        + (f"; overrides the {profile.name!r} profile" if overrides else "")
    ]
    details += [f"WIDENS {profile.name!r}: {wider}" for wider in widening(profile, overrides)]
    return details


def _base_profiles() -> dict[str, Profile]:
    profiles = {}
    for folder in search_path():
        for source in read_folder(folder, "*.toml"):
            with contextlib.suppress(ProfileError):
                profile = parse_profile(source, _ANY_TOOL)
                profiles[profile.name] = profile
    return profiles


class _AnyTool(set[str]):
    """Lets a profile be parsed for review whatever tools it names."""

    def __contains__(self, _name: object) -> bool:
        return True


_ANY_TOOL = _AnyTool()
