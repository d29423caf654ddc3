"""The README matches the command: every `gaffer` command it names exists, every flag
it names is one some command takes, and every setting it names is a setting."""

from __future__ import annotations

import re
from pathlib import Path

import click

from supervisor import settings
from supervisor.cli import main

README = (Path(__file__).parent.parent / "README.md").read_text()


def commands(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        found[path] = command
        if isinstance(command, click.Group):
            found.update(commands(command, path + " "))
    return found


def test_every_command_the_readme_names_exists() -> None:
    known = commands(main)
    # In code: an inline span, or a line of a shell block, that starts with `gaffer`.
    spans = re.findall(r"`(gaffer [^`]+)`", README)
    blocks = README.split("```")[1::2]  # inside fenced code blocks
    lines = [line.strip() for block in blocks for line in block.splitlines()]
    named = {
        m.group(1)
        for text in spans + lines
        if (m := re.match(r"gaffer ([a-z][a-z-]+(?: [a-z][a-z-]+)?)", text))
    }

    def exists(words: str) -> bool:
        first = words.split()[0]
        if first not in known:
            return False
        # A group's second word is one of its commands; any other's is an argument.
        return not isinstance(known[first], click.Group) or " " not in words or words in known

    assert sorted(w for w in named if not exists(w)) == []


def test_every_flag_the_readme_names_is_one_gaffer_takes() -> None:
    flags = {"--help", "--version"}
    for command in [main, *commands(main).values()]:
        for param in command.params:
            if isinstance(param, click.Option):
                flags.update(param.opts)
                flags.update(param.secondary_opts)
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", _without_other_commands(README)))
    assert sorted(named - flags) == []


def _without_other_commands(text: str) -> str:
    """The README without the command lines of other programs it shows (`ray start …`
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


def test_every_flag_of_gaffer_run_is_in_the_readme() -> None:
    run = main.commands["run"]
    options = [
        o for p in run.params if isinstance(p, click.Option) and not p.hidden for o in p.opts
    ]
    undocumented = [o for o in options if not re.search(re.escape(o) + r"(?![\w-])", README)]
    assert undocumented == []


def test_every_setting_the_readme_names_as_a_config_key_exists() -> None:
    section = README.split("Config files, lowest precedence first", 1)[1].split("\n\n", 1)[0]
    keys = set(re.findall(r"`([a-z_]+)`", section))
    unknown = sorted(k for k in keys if "_" in k and k not in settings.Settings.model_fields)
    assert unknown == []


def test_every_command_runs_its_help(tmp_path: Path) -> None:
    from tests.helpers import gaffer

    for path in sorted(commands(main)):
        done = gaffer(tmp_path, *path.split(), "-h")
        assert done.returncode == 0 and "Usage:" in done.stdout, path
