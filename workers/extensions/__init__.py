"""Extensions, cheapest first: Skills (text), plugins (a Python file), MCP servers (a process).

A broken extension is reported in one line and skipped; it never takes gaffer down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.extensions.mcp_servers import McpHub, read_configs
from workers.extensions.plugins import load_plugins
from workers.extensions.skills import Skill, load_skills, skills_prompt, use_skill_tool
from workers.log.events import Emitter
from workers.log.schema import Extension
from workers.tools.base import Tool
from workers.trust import Kind, Source, WorkspaceTrust, read_folder, user_config_dir


@dataclass
class Extensions:
    tools: dict[str, Tool[Any]] = field(default_factory=dict)
    """Plugin and MCP tools, by name."""
    skills: dict[str, Skill] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    hub: McpHub | None = None

    def use_skill(self) -> Tool[Any] | None:
        return use_skill_tool(self.skills) if self.skills else None

    def prompt(self) -> str:
        return skills_prompt(self.skills)

    def close(self) -> None:
        if self.hub is not None:
            self.hub.close()
            self.hub = None


def load_extensions(
    trust: WorkspaceTrust | None, events: Emitter, *, taken: set[str], log_dir: Path
) -> Extensions:
    """The user's own extensions, and those of the workspace that `trust` allows (None: none)."""
    extensions = Extensions()
    log = events.bind(agent_id="extensions")

    def warn(message: str) -> None:
        extensions.warnings.append(message)
        log.emit(Extension(status="skipped", message=message))

    user = user_config_dir()

    def workspace(kind: Kind) -> list[Source]:
        return trust.sources(kind) if trust is not None else []

    extensions.skills = load_skills(
        [*read_folder(user / "skills", "*/SKILL.md"), *workspace("skill")], warn
    )
    extensions.tools = load_plugins(
        [*read_folder(user / "tools", "*.py"), *workspace("plugin")], taken, warn
    )
    configs = read_configs([*workspace("mcp"), *read_folder(user, "mcp.json")], warn)
    if configs:
        extensions.hub = McpHub(events.bind(agent_id="mcp"), log_dir)
        for name, tool in extensions.hub.start(configs, warn).items():
            if name in taken or name in extensions.tools:
                warn(f"MCP tool {name} skipped: the name is already taken")
                continue
            extensions.tools[name] = tool
    for name, tool in extensions.tools.items():
        log.emit(
            Extension(status="loaded", tool=name, origin=tool.origin, read_only=tool.read_only)
        )
    return extensions
