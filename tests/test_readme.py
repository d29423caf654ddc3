"""The README and the docs/ pages match the command: every `gaffer` command they name
exists, every flag they name is one some command takes, and every setting they name is
a setting. The README stays a front door: small, its sections in order, linking every
docs/ page, and every link between the pages leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from supervisor import settings
from supervisor.cli import main

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
PAGES = {"README.md": README} | {
    f"docs/{page.name}": page.read_text() for page in sorted(DOCS.glob("*.md"))
}
CONFIGURATION = PAGES["docs/configuration.md"]

# The README's `## ` sections, in order: what it is (above them), installing, a first
# run, the bundled model, cost, results, security, and where the rest is.
SECTIONS = [
    "Install",
    "Quick start",
    "The bundled model",
    "What a run costs",
    "Exit codes, JSON and logs",
    "Security model",
    "More",
]


def commands(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        found[path] = command
        if isinstance(command, click.Group):
            found.update(commands(command, path + " "))
    return found


@pytest.mark.parametrize("page", PAGES)
def test_every_command_a_page_names_exists(page: str) -> None:
    text = PAGES[page]
    known = commands(main)
    # In code: an inline span, or a line of a shell block, that starts with `gaffer`.
    spans = re.findall(r"`(gaffer [^`]+)`", text)
    blocks = text.split("```")[1::2]  # inside fenced code blocks
    lines = [line.strip() for block in blocks for line in block.splitlines()]
    named = {
        m.group(1)
        for line in spans + lines
        if (m := re.match(r"gaffer ([a-z][a-z-]+(?: [a-z][a-z-]+)?)", line))
    }

    def exists(words: str) -> bool:
        first = words.split()[0]
        if first not in known:
            return False
        # A group's second word is one of its commands; any other's is an argument.
        return not isinstance(known[first], click.Group) or " " not in words or words in known

    assert sorted(w for w in named if not exists(w)) == []


@pytest.mark.parametrize("page", PAGES)
def test_every_flag_a_page_names_is_one_gaffer_takes(page: str) -> None:
    flags = {"--help", "--version"}
    for command in [main, *commands(main).values()]:
        for param in command.params:
            if isinstance(param, click.Option):
                flags.update(param.opts)
                flags.update(param.secondary_opts)
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", _without_other_commands(PAGES[page])))
    assert sorted(named - flags) == []


def _without_other_commands(text: str) -> str:
    """The page without the command lines of other programs it shows (`ray start …`
    and their continuation lines, `git diff …` or `python -m bench…` in a line), whose
    flags are theirs."""
    kept, continued = [], False
    text = re.sub(r"`(git|python -m bench)[^`]*`", "", text)
    for line in text.splitlines():
        theirs = continued or line.lstrip().startswith("ray ")
        continued = theirs and line.rstrip().endswith("\\")
        if not theirs:
            kept.append(line)
    return "\n".join(kept)


def test_every_flag_of_gaffer_run_is_in_the_configuration_reference() -> None:
    run = main.commands["run"]
    options = [
        o for p in run.params if isinstance(p, click.Option) and not p.hidden for o in p.opts
    ]
    flags = _section(CONFIGURATION, "Flags of `gaffer run`")
    undocumented = [o for o in options if not re.search(re.escape(o) + r"(?![\w-])", flags)]
    assert undocumented == []


def test_every_setting_a_page_names_as_a_config_key_exists() -> None:
    paragraphs = [
        text.split("Config files, lowest precedence first", 1)[1].split("\n\n", 1)[0]
        for text in PAGES.values()
        if "Config files, lowest precedence first" in text
    ]
    assert paragraphs, "no page has the config files' paragraph"
    keys = {key for section in paragraphs for key in re.findall(r"`([a-z_]+)`", section)}
    unknown = sorted(k for k in keys if "_" in k and k not in settings.Settings.model_fields)
    assert unknown == []


def test_the_configuration_reference_lists_every_setting() -> None:
    table = _section(CONFIGURATION, "Settings")
    listed = re.findall(r"^\| `([a-z_]+)` \|", table, re.MULTILINE)
    assert sorted(listed) == sorted(settings.Settings.model_fields)


@pytest.mark.parametrize("page", PAGES)
def test_every_key_a_page_sets_is_a_setting_or_a_profile_key(page: str) -> None:
    from workers.assembly.profiles import Profile, ProfileLimits
    from workers.sandbox.options import DockerOptions
    from workers.user_hooks.config import HOOK_KEYS

    known = {
        *settings.Settings.model_fields,
        *settings.Price.model_fields,
        *settings.PermissionLists.model_fields,
        *HOOK_KEYS,
        *Profile.model_fields,
        *ProfileLimits.model_fields,
        *DockerOptions.model_fields,
    }
    text = PAGES[page]
    spans = re.findall(r"`([a-z_]+) = [^`]+`", text)
    toml = [b for b in text.split("```")[1::2] if b.startswith("toml")]
    lines = [m for block in toml for m in re.findall(r"^([a-z_]+) = ", block, re.MULTILINE)]
    assert sorted({k for k in spans + lines if k not in known}) == []


def test_every_command_runs_its_help(tmp_path: Path) -> None:
    from tests.helpers import gaffer

    for path in sorted(commands(main)):
        done = gaffer(tmp_path, *path.split(), "-h")
        assert done.returncode == 0 and "Usage:" in done.stdout, path


def test_the_readme_is_a_front_door_under_16000_bytes() -> None:
    assert len(README.encode()) < 16_000


def test_the_readme_sections_come_in_order() -> None:
    assert re.findall(r"^## (.+)$", _prose(README), re.MULTILINE) == SECTIONS


def test_every_docs_page_the_readme_links_exists() -> None:
    linked = set(re.findall(r"\]\((docs/[^)#\s]+)", README))
    assert linked, "the README links no docs/ page"
    assert sorted(p for p in linked if not (ROOT / p).is_file()) == []


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = set(re.findall(r"\]\((docs/[^)#\s]+)", README))
    pages = {f"docs/{page.name}" for page in DOCS.glob("*.md")}
    assert sorted(pages - linked) == []


@pytest.mark.parametrize("page", PAGES)
def test_every_link_of_a_page_leads_somewhere(page: str) -> None:
    """A relative link names a file that exists, and its `#anchor` a heading there."""
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", _prose(PAGES[page])):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (ROOT / page).parent / path if path else ROOT / page
        if not file.exists() or (anchor and anchor not in _anchors(file.read_text())):
            broken.append(target)
    assert broken == []


def _prose(text: str) -> str:
    """The text without its fenced code blocks, whose `#` lines are no headings."""
    return re.sub(r"```.*?```", "", text, flags=re.DOTALL)


def _anchors(text: str) -> set[str]:
    """Each heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces
    as hyphens (`### Step mode: `--step`` is `step-mode---step`)."""
    headings = re.findall(r"^#{1,6} (.+)$", _prose(text), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _section(text: str, heading: str) -> str:
    """The text of a `## heading` section, up to the next `## `."""
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
