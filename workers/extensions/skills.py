"""Skills: SKILL.md files with front matter; the prompt lists them, use_skill opens one."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field

from workers.tools.base import Args, Tool, ToolContext, ToolError, ToolResult
from workers.trust import Source

_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)", re.DOTALL)
# Files listed beside a skill's body, so the agent knows what it can read.
MAX_LISTED_FILES = 50


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path
    body: str


def load_skills(sources: Iterable[Source], warn: Callable[[str], None]) -> dict[str, Skill]:
    """Skills by name; a later one overrides an earlier one. Bad ones are reported, skipped."""
    skills: dict[str, Skill] = {}
    for source in sources:
        try:
            skill = parse_skill(source)
        except ValueError as error:
            warn(f"skill {source.origin} skipped: {error}")
            continue
        skills[skill.name] = skill
    return skills


def parse_skill(source: Source) -> Skill:
    text = source.data.decode("utf-8", errors="replace")
    match = _FRONT_MATTER.match(text)
    if match is None:
        raise ValueError(
            "no front matter: start the file with ---, name: and description:, then ---"
        )
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as error:
        raise ValueError(
            f"front matter is not valid YAML ({' '.join(str(error).split())})"
        ) from error
    if not isinstance(meta, dict):
        raise ValueError("front matter must be key: value lines")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name.strip():
        raise ValueError("front matter has no name")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("front matter has no description")
    folder = (source.path or Path(source.origin)).parent
    return Skill(name.strip(), " ".join(description.split()), folder, text[match.end() :].strip())


def skills_prompt(skills: dict[str, Skill]) -> str:
    if not skills:
        return ""
    lines = [f"- {s.name}: {s.description}" for s in skills.values()]
    return (
        "# Skills\n\nCall use_skill(name) to read one before doing what it covers:\n"
        + "\n".join(lines)
    )


class UseSkillArgs(Args):
    name: str = Field(description="The skill's name, as listed in the system prompt.")


def use_skill_tool(skills: dict[str, Skill]) -> Tool[Any]:
    def run(_ctx: ToolContext, args: UseSkillArgs) -> ToolResult:
        skill = skills.get(args.name)
        if skill is None:
            raise ToolError(
                f"no skill {args.name!r}; the skills are: {', '.join(skills) or 'none'}"
            )
        files = sorted(
            str(p.relative_to(skill.folder))
            for p in skill.folder.rglob("*")
            if p.is_file() and p.name != "SKILL.md"
        )
        listed = "\n".join(f"- {f}" for f in files[:MAX_LISTED_FILES])
        more = (
            f"\n… and {len(files) - MAX_LISTED_FILES} more" if len(files) > MAX_LISTED_FILES else ""
        )
        beside = f"\n\nFiles beside it in {skill.folder}:\n{listed}{more}" if files else ""
        return ToolResult(output=skill.body + beside, summary=f"skill {skill.name}")

    return Tool(
        name="use_skill",
        description="Read a skill: instructions for a kind of task, listed by name in the system prompt.",
        args=UseSkillArgs,
        run=run,
        read_only=True,
        kind="harness",
        origin="harness",
    )
