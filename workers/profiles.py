"""Profiles: what an agent may use, as validated data loaded from TOML files."""

from __future__ import annotations

import fnmatch
import os
import tomllib
from collections.abc import Collection, Iterable
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workers.limits import DEFAULT_MAX_STEPS, Limits

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


class DockerOptions(BaseModel):
    """How a `docker` profile's container is made."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    image: str = "gaffer-sandbox:latest"
    """The image; another one for projects that need their own toolchain."""
    network: str = "none"
    """Docker network mode; `none` unless the profile opts into a named network."""
    memory: str = Field("2g", pattern=r"^[0-9]+[kmg]?$")
    """Memory limit, e.g. 2g or 512m; the container is killed past it."""
    cpus: float = Field(1.0, gt=0, le=64)
    pids: int = Field(512, ge=16)
    """Processes and threads at once: a fork bomb stops here."""


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
    limits: ProfileLimits = Field(default_factory=ProfileLimits)
    model: str | None = None
    """Another model for this profile; default: the run's model."""
    docker: DockerOptions = Field(default_factory=DockerOptions)
    """For `docker` profiles: image, network and resource limits."""
    system_prompt: str = Field(min_length=1)
    """The agent's instructions; `{workspace}` is replaced by the workspace path."""
    source: str = Field("", exclude=True)
    """Where the profile was loaded from (set by the loader)."""


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


def search_path(workspace: Path) -> list[Path]:
    """Built-ins first; a later folder overrides an earlier one by profile name."""
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [builtin_dir(), config / "gaffer" / "profiles", workspace / ".gaffer" / "profiles"]


def load_profiles(folders: Iterable[Path], known_tools: Iterable[str]) -> dict[str, Profile]:
    known = set(known_tools) | HARNESS_TOOLS
    profiles: dict[str, Profile] = {}
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            profile = load_profile(path, known)
            profiles[profile.name] = profile
    return profiles


def load_profile(path: Path, known_tools: set[str]) -> Profile:
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ProfileError(f"{path}: cannot be read as TOML: {error}") from error
    data.setdefault("name", path.stem)
    try:
        profile = Profile.model_validate({**data, "source": str(path)})
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(map(str, first["loc"])) or "file"
        raise ProfileError(f"{path}: {where}: {first['msg']}") from error
    unknown = [tool for tool in profile.tools if tool not in known_tools and not is_pattern(tool)]
    if unknown:
        raise ProfileError(
            f"{path}: tools: unknown tool(s) {', '.join(unknown)}; known: {', '.join(sorted(known_tools))}"
        )
    return profile
