"""Which command checks a run's work, and where that came from: the first of `--check`,
the config's `check`, a command the task names, or the project's own files.

A task names its command in many wordings ("run them with: pytest -q x_test.py",
"(run `make test`)", 'use "npm test"', mid-sentence). Each place a command may stand
(backticks, quotes, parentheses, after "run:", "with:" or "command:") gives one
candidate, cut where the sentence goes on (an unmatched closing parenthesis, a full
stop before a capital) and trimmed of punctuation. A candidate counts only when bash
parses it as a command with nothing left over and it runs tests (guards/test_runs.py).
"""

from __future__ import annotations

import configparser
import json
import os
import re
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from workers.guards.test_runs import is_test_file, is_test_run
from workers.tools.bash_reading import parse

Source = Literal["flag", "config", "task", "project"]
SOURCE_WORDS = {
    "flag": "given with --check",
    "config": "from the config's check",
    "task": "named in the task",
    "project": "from the project's files",
}
# Test files looked for under the workspace before a plain pytest run is taken; a tree
# past this is large enough that its test files are found sooner than the walk ends.
MAX_WALKED = 20_000
# A named command longer than this is a paragraph, not a command.
MAX_COMMAND_CHARS = 300
# What npm writes into a new package.json: a test script that only fails.
NPM_PLACEHOLDER = "no test specified"


@dataclass(frozen=True)
class Check:
    command: str
    source: Source

    def describe(self) -> str:
        return f"check: `{self.command}` ({SOURCE_WORDS[self.source]})"


@dataclass(frozen=True)
class NoCheck:
    reason: str

    def describe(self) -> str:
        return f"unchecked: {self.reason}"


def choose(
    workspace: Path, task: str, *, flag: str | None = None, config: str | None = None
) -> Check | NoCheck:
    """The run's check, from the first source that gives one."""
    if flag and flag.strip():
        return Check(flag.strip(), "flag")
    if config and config.strip():
        return Check(config.strip(), "config")
    if named := named_command(task):
        return Check(named, "task")
    if found := project_check(workspace, task):
        return Check(found, "project")
    return NoCheck(
        "no --check, no check in the config, no test command in the task, and no tests "
        "in the project's files (pytest, package.json, go.mod, Cargo.toml, a Makefile test)"
    )


# -- a command the task names ------------------------------------------------------

_BACKTICKS = re.compile(r"`{1,3}([^`]+?)`{1,3}")
_QUOTED = re.compile(r"\"([^\"\n]+)\"|“([^”\n]+)”|'([^'\n]+)'")
_AFTER_WORD = re.compile(r"\b(?:run|with|command|using)\s*:\s*([^\n`]+)", re.IGNORECASE)
_PARENTHESES = re.compile(r"\(([^()\n]+)\)")
_AFTER_WORD_ALONE = re.compile(r"\b(?:run|with|using)\s+(?!the\b|them\b|it\b)([^\n]+)", re.I)
# Where a sentence goes on after the command: a full stop, semicolon or the like before
# a capital letter or the end (a path's own dots are followed by letters, not a space).
_SENTENCE_END = re.compile(r"[.;!?]+(?:\s+(?=[A-Z\"'“(])|\s*$)")
_TRAILING = ".,;:!?\"'”’"


def named_command(text: str, extra: Iterable[str] = ()) -> str | None:
    """The first test command the task names, in whatever wording; None when it names
    none. `extra`: more test runners, as guards/test_runs.is_test_run takes them."""
    for candidate in _candidates(text):
        command = _cut(candidate)
        if command and _one_command(command) and is_test_run(command, extra):
            return command
    return None


def _candidates(text: str) -> Iterator[str]:
    """Each place a command may stand, in the order they appear in the text."""
    found: list[tuple[int, str]] = []
    found += [(m.start(), m.group(1)) for m in _BACKTICKS.finditer(text)]
    found += [(m.start(), next(g for g in m.groups() if g)) for m in _QUOTED.finditer(text)]
    found += [(m.start(), m.group(1)) for m in _AFTER_WORD.finditer(text)]
    found += [(m.start(), m.group(1)) for m in _PARENTHESES.finditer(text)]
    for _, candidate in sorted(found, key=lambda pair: pair[0]):
        yield candidate
    # "run the tests with pytest -q x_test.py" has no colon: the words after "run", "with"
    # or "using" are tried as they stand, cut as any other.
    yield from (m.group(1) for m in _AFTER_WORD_ALONE.finditer(text))


def _cut(candidate: str) -> str:
    """The candidate up to where its sentence goes on, trimmed."""
    text = candidate.strip()
    depth = 0
    for index, char in enumerate(text):
        depth += char == "("
        if char == ")":
            if depth == 0:  # closes a parenthesis opened before the command began
                text = text[:index]
                break
            depth -= 1
    if end := _SENTENCE_END.search(text):
        text = text[: end.start()]
    text = text.strip().rstrip(_TRAILING).strip()
    return text if 0 < len(text) <= MAX_COMMAND_CHARS else ""


def _one_command(command: str) -> bool:
    """Bash takes it whole as commands, with nothing it cannot parse left over."""
    tree = parse(command)
    return not tree.root_node.has_error and tree.root_node.named_child_count == 1


# -- the project's own files ---------------------------------------------------------


def project_check(workspace: Path, task: str = "") -> str | None:
    """The test command the project's files imply, with the test files the task names."""
    if _uses_pytest(workspace):
        return " ".join(["python3 -m pytest -q", *_named_test_files(workspace, task)])
    if (script := _npm_test(workspace)) is not None:
        return script
    if (workspace / "go.mod").is_file():
        return "go test ./..."
    if (workspace / "Cargo.toml").is_file():
        return "cargo test"
    if _make_test(workspace):
        return "make test"
    return None


def _uses_pytest(workspace: Path) -> bool:
    if (workspace / "pytest.ini").is_file() or (workspace / "conftest.py").is_file():
        return True
    if _has_section(workspace / "setup.cfg", "tool:pytest") or _has_section(
        workspace / "tox.ini", "pytest"
    ):
        return True
    try:
        with open(workspace / "pyproject.toml", "rb") as file:
            if "pytest" in tomllib.load(file).get("tool", {}):
                return True
    except (OSError, tomllib.TOMLDecodeError):
        pass
    return any(is_test_file(rel) and rel.endswith(".py") for rel in _files(workspace))


def _has_section(path: Path, section: str) -> bool:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, configparser.Error):
        return False
    return parser.has_section(section)


def _files(workspace: Path) -> Iterator[str]:
    """Workspace-relative files, shallow folders first, never into hidden or vendored
    folders and never through a link; at most MAX_WALKED."""
    root = os.path.realpath(workspace)
    seen = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and d not in {"node_modules", "venv"}
        )
        rel = os.path.relpath(folder, root)
        for name in sorted(files):
            seen += 1
            if seen > MAX_WALKED:
                return
            yield name if rel == "." else f"{rel}/{name}"


def _named_test_files(workspace: Path, task: str) -> list[str]:
    """Test files of the workspace the task names by path, in the order it names them."""
    named = []
    for word in re.findall(r"[\w./-]+\.py\b", task):
        rel = word.strip("./") if word.startswith("./") else word
        if is_test_file(rel) and (workspace / rel).is_file() and rel not in named:
            named.append(rel)
    return named


def _npm_test(workspace: Path) -> str | None:
    try:
        data = json.loads((workspace / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    script = data.get("scripts", {}).get("test") if isinstance(data, dict) else None
    if not isinstance(script, str) or not script.strip() or NPM_PLACEHOLDER in script:
        return None
    return "npm test"


def _make_test(workspace: Path) -> bool:
    for name in ("GNUmakefile", "makefile", "Makefile"):
        try:
            text = (workspace / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        return re.search(r"^test\s*:", text, re.MULTILINE) is not None
    return False
