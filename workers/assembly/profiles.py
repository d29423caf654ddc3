"""Profiles: what an agent may use, as validated data loaded from TOML files."""

from __future__ import annotations

import fnmatch
import os
import tomllib
from collections.abc import Collection, Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workers.limits import DEFAULT_MAX_STEPS, Limits
from workers.model import Endpoint
from workers.sandbox.options import DockerOptions
from workers.trust import Source, read_folder

# Tools the harness itself provides to an agent, outside the tool registry.
HARNESS_TOOLS = frozenset({"delegate", "use_skill"})


class ProfileError(Exception):
    """A profile file that cannot be used: the message names the file, the key and why."""


class ProfileLimits(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    max_steps: int = Field(DEFAULT_MAX_STEPS, ge=1)
    """Model calls the agent may make."""
    max_seconds: float | None = Field(None, gt=0)
    """Wall-clock seconds for the agent, tools and sub-agents included."""
    max_tokens: int | None = Field(None, ge=1)
    """Prompt + completion tokens for the agent and its sub-agents."""

    def as_limits(self) -> Limits:
        return Limits(self.max_steps, self.max_seconds, self.max_tokens)


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    """How the supervisor and the user refer to it."""
    description: str = Field(min_length=1)
    """Shown to the supervisor's model so it knows what to hand this profile."""
    tools: list[str]
    """The tools the profile grants, by name."""
    sandbox: Literal["none", "docker"] = "none"
    """`docker` runs every tool in a container holding only the workspace."""
    isolate: bool = False
    """An editing worker works on a copy of its own (a git worktree of the workspace as
    it starts), beside other isolated editors; what it changed is brought into the
    workspace when it ends, all or nothing (`--isolate` does this for every editor)."""
    limits: ProfileLimits = Field(default_factory=ProfileLimits)
    model: str | None = None
    """Another model for this profile; default: the run's model."""
    api: Literal["chat", "responses"] | None = None
    """Another wire protocol for this profile's model; default: the run's (--api)."""
    context_window: int | None = Field(None, ge=1024, le=100_000_000)
    """Its model's context window in tokens, when it is not the run's model's."""
    base_url: str | None = Field(None, pattern=r"^https?://\S+$")
    """An endpoint of its own for this profile's model (default: the run's). Only a
    profile in gaffer or in your own config may name one, never a workspace's."""
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The environment variable that holds the key for `base_url`: the key itself is
    never written in a file."""
    docker: DockerOptions = Field(default_factory=DockerOptions)
    """For `docker` profiles: image, network and resource limits. A workspace's profile
    may not go past gaffer's or the user's own profile of its name (`_within_ceiling`)."""
    system_prompt: str = Field(min_length=1)
    """The agent's instructions; `{workspace}` is replaced by the workspace path."""
    source: str = Field("", exclude=True)
    """Where the profile was loaded from (set by the loader)."""

    @property
    def endpoint(self) -> Endpoint | None:
        """Its own endpoint, when it names one."""
        return Endpoint(self.base_url, self.api_key_env) if self.base_url else None


READ_ONLY_EXTENSIONS = "@read_only_extensions"
"""In a profile's tools: every read-only plugin and MCP tool."""


def is_pattern(entry: str) -> bool:
    """Entries that may match nothing without being an error: MCP servers can be down."""
    return entry.startswith(("@", "mcp__")) or any(c in entry for c in "*?[")


def expand_tools(
    entries: list[str], read_only: dict[str, bool], extensions: Collection[str]
) -> list[str]:
    """A profile's tool entries as the tool names they grant, in order, each once."""
    names: dict[str, None] = {}
    for entry in entries:
        if entry == READ_ONLY_EXTENSIONS:
            names.update((n, None) for n in sorted(extensions) if read_only.get(n))
        elif is_pattern(entry):
            names.update((n, None) for n in sorted(read_only) if fnmatch.fnmatchcase(n, entry))
        else:
            names[entry] = None
    return list(names)


def is_parallel_safe(
    profile: Profile, read_only: dict[str, bool], extensions: Collection[str] = ()
) -> bool:
    """Exactly when every granted tool is read-only: derived from the tools, never declared.

    A name with no known tool behind it counts as not read-only: unknown is unsafe.
    """
    return all(
        read_only.get(name, False)
        for name in expand_tools(profile.tools, read_only, set(extensions))
    )


def builtin_dir() -> Path:
    return Path(str(resources.files("profiles")))


def user_dir() -> Path:
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return config / "gaffer" / "profiles"


def search_path() -> list[Path]:
    """Built-ins, then the user's own; a workspace's profiles come only through trust."""
    return [builtin_dir(), user_dir()]


ENDPOINT_KEYS = ("base_url", "api_key_env")
"""Where a profile's requests go and with which key: never from a workspace, whose
profile could otherwise send the user's code and key to a server of its choosing."""


def load_profiles(
    folders: Iterable[Path], known_tools: Iterable[str] | None, extra: Iterable[Source] = ()
) -> dict[str, Profile]:
    """Profiles from folders, then `extra` (a trusted workspace's). A later file of a
    name already loaded changes only the keys it names (a table such as `limits` key by
    key); a new name is a whole profile. With `known_tools` None, tool names are not
    checked (before plugins and MCP servers, whose tools profiles may name, are loaded)."""
    known = None if known_tools is None else set(known_tools) | HARNESS_TOOLS
    profiles: dict[str, Profile] = {}
    for folder in folders:
        for source in read_folder(folder, "*.toml"):
            profile = parse_profile(source, known, profiles)
            profiles[profile.name] = profile
    own = dict(profiles)  # gaffer's and the user's: what a workspace's may not go past
    for source in extra:
        profile = parse_profile(source, known, profiles, from_workspace=True, ceiling=own)
        profiles[profile.name] = profile
    return profiles


def _read(source: Source) -> dict[str, Any]:
    try:
        data: dict[str, Any] = tomllib.loads(source.data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ProfileError(f"{source.origin}: cannot be read as TOML: {error}") from error
    data.setdefault("name", Path(source.origin).stem)
    return data


def _overlaid(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`base` with the keys `over` names; tables merged key by key, anything else replaced."""
    merged = dict(base)
    for key, value in over.items():
        old = merged.get(key)
        both_tables = isinstance(old, dict) and isinstance(value, dict)
        merged[key] = _overlaid(old, value) if both_tables else value  # type: ignore[arg-type]
    return merged


def parse_profile(
    source: Source,
    known_tools: set[str] | None,
    loaded: Mapping[str, Profile] | None = None,
    *,
    from_workspace: bool = False,
    ceiling: Mapping[str, Profile] | None = None,
) -> Profile:
    """The profile in `source`; when it names one of `loaded`, only the keys it names
    change that one. A workspace's (`from_workspace`) may not name an endpoint, nor give
    its container more than `ceiling` (gaffer's and the user's own profiles) does."""
    origin = source.origin
    data = _read(source)
    if from_workspace and (named := [k for k in ENDPOINT_KEYS if k in data]):
        raise ProfileError(
            f"{origin}: {named[0]}: a workspace's profile may not name an endpoint; set it "
            f"in a profile of your own ({user_dir()})"
        )
    if loaded and (over := loaded.get(data["name"])) is not None:
        data = _overlaid(over.model_dump(), data)
    try:
        profile = Profile.model_validate({**data, "source": origin})
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(map(str, first["loc"])) or "file"
        raise ProfileError(f"{origin}: {where}: {first['msg']}") from error
    if from_workspace:
        _within_ceiling(profile, origin, ceiling or {})
    if known_tools is None:
        return profile
    unknown = [tool for tool in profile.tools if tool not in known_tools and not is_pattern(tool)]
    if unknown:
        raise ProfileError(
            f"{origin}: tools: unknown tool(s) {', '.join(unknown)}; known: {', '.join(sorted(known_tools))}"
        )
    return profile


def _within_ceiling(profile: Profile, origin: str, ceiling: Mapping[str, Profile]) -> None:
    """A workspace's profile may not give its container more than the user's or gaffer's
    own profile of its name, or a new one more than the built-in defaults (`coder`'s and
    `shell`'s): a trusted repository would otherwise open the network to the host's own
    services, or mount another image, by saying only "runs in Docker". Checked whatever
    its sandbox, so that no later switch to Docker brings them."""
    own = ceiling.get(profile.name)
    wider = profile.docker.wider_than(own.docker if own else DockerOptions())
    if wider:
        raise ProfileError(
            f"{origin}: docker.{next(iter(wider))}: a workspace's profile may not widen its "
            f"sandbox: {'; '.join(wider.values())}; only a profile of your own may set it "
            f"({user_dir()})"
        )


def widening(profile: Profile, base: Profile | None) -> list[str]:
    """How `profile` grants more than the profile of the same name it overrides: what a
    user must see before trusting a workspace that redefines `coder`. (A wider container
    never gets this far: a workspace's profile that asks for one does not load.)"""
    if base is None:
        return []
    wider = []
    if base.sandbox == "docker" and profile.sandbox != "docker":
        wider.append("runs on the host, not in a Docker container")
    added = [tool for tool in profile.tools if tool not in base.tools]
    if added:
        wider.append("adds tools " + ", ".join(added))
    return wider
