"""Permission rules: `allow`, `ask` and `deny` lists of patterns, each rule with the file
it came from, judged the same way for every agent of the run.

A rule is a tool name (`read_file`, or a glob such as `mcp_*`), or a tool and what it
is about in parentheses:

- `run_shell(git push)`: every command that starts with these words (`:*` at the end,
  as in Claude Code's `Bash(git push:*)`, says the same); a pattern with `*`, `?` or `[`
  is a glob over the whole command instead. Each simple command of the line counts
  (workers/permissions/commands.py): a deny or an ask matches when any does, an allow
  only when it covers every one;
- `write_file(migrations/**)`, `edit_file(…)`, `read_file(…)`, any tool with a `path`:
  a glob over the path inside the workspace (`*` and `?` within a name, `**` across
  folders; a pattern without `/` matches a name in any folder), as written and as its
  links resolve;
- `delegate(coder)`: a worker of that profile (a glob).

Deny wins over ask, ask over allow. What no rule matches is left to the mode.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from workers.permissions.commands import Simple, plain, simple_commands
from workers.tools.base import ToolError
from workers.tools.git_programs import repository_programs
from workers.tools.nearby import moved
from workers.tools.search import glob_regex
from workers.tools.workspace import resolve

Action = Literal["allow", "ask", "deny"]
ACTIONS: tuple[Action, ...] = ("deny", "ask", "allow")  # the order they win in
_GLOB = re.compile(r"[*?\[]")
_SHORT = re.compile(r"-[A-Za-z]+")
_RULE = re.compile(r"\s*([A-Za-z0-9_.*?\[\]-]+)\s*(?:\((.*)\))?\s*", re.DOTALL)
# Tools whose rules are about something other than a path.
SHELL, DELEGATE = "run_shell", "delegate"
TOOL_NAMES = frozenset(
    {"read_file", "write_file", "edit_file", "list_dir", "grep", "find_files", "run_shell"}
    | {"remember", "use_skill", "delegate", "find_symbol"}
)
"""gaffer's own tools: a rule naming one nearly is a typo, said at once (plugins and
MCP servers bring other names, which are taken as written)."""


class RuleError(ValueError):
    """A rule that cannot be read: said with the rule and where it is."""


@dataclass(frozen=True)
class Rule:
    action: Action
    tool: str
    """A tool name, or a glob over names."""
    pattern: str | None
    """What the call is about, or None: every call of the tool."""
    source: str
    """Where it was written: a config file, or the command line."""
    from_workspace: bool = False
    """A trusted workspace's: its allow rules hold only in containers."""

    @property
    def text(self) -> str:
        return self.tool if self.pattern is None else f"{self.tool}({self.pattern})"

    def said(self) -> str:
        """The rule as a user finds it: `deny run_shell(git push)` in ~/.config/…"""
        return f"{self.action} {self.text} in {self.source}"


def parse_rule(
    text: str,
    action: Action,
    source: str,
    known_tools: Iterable[str] = TOOL_NAMES,
    *,
    from_workspace: bool = False,
) -> Rule:
    match = _RULE.fullmatch(text) if isinstance(text, str) else None
    if match is None or (match.group(2) is not None and not match.group(2).strip()):
        raise RuleError(
            f"{source}: {action} rule {text!r} is not TOOL or TOOL(PATTERN), as in "
            "run_shell(git push) or write_file(migrations/**)"
        )
    tool, pattern = match.group(1), match.group(2)
    known = set(known_tools)
    if known and not _GLOB.search(tool) and tool not in known:
        import difflib

        close = difflib.get_close_matches(tool, sorted(known), n=1, cutoff=0.75)
        if close:  # a typo would make a deny rule hold nothing back
            raise RuleError(
                f"{source}: {action} rule {text!r}: no tool {tool!r}; did you mean {close[0]!r}?"
            )
    return Rule(
        action, tool, pattern.strip() if pattern is not None else None, source, from_workspace
    )


@dataclass(frozen=True)
class Call:
    """A tool call as rules see it: whose, which tool, its arguments, and where its
    paths lead (the workspace as the agent's files are on this machine)."""

    tool: str
    arguments: dict[str, Any]
    workspace: Path
    container_root: str | None = None
    """Where the workspace is mounted for the agent, when it works in a container."""


@dataclass(frozen=True)
class Match:
    """The rule that decided, and how sure the match is."""

    rule: Rule
    unsure: bool = False
    """The call might be what the rule names, and that cannot be known before it runs
    (`$TOOL push` against `deny run_shell(git push)`): it is asked about."""
    part: str = ""
    """The part of a command line the rule matched, where it matched one part."""


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.rules)

    def of(self, action: Action) -> list[Rule]:
        return [r for r in self.rules if r.action == action]

    def plus(self, more: Sequence[Rule]) -> RuleSet:
        return RuleSet((*self.rules, *more))

    def match(self, call: Call) -> Match | None:
        """The rule that decides the call (deny, then ask, then allow), or None."""
        rules = [r for r in self.rules if fnmatch.fnmatchcase(call.tool, r.tool)]
        if not rules:
            return None
        commands = _commands(str(call.arguments.get("command", ""))) if call.tool == SHELL else []
        paths = _paths(call) if call.tool not in (SHELL, DELEGATE) else []
        for action in ("deny", "ask"):
            unsure: Match | None = None
            for rule in (r for r in rules if r.action == action):
                found = _refusing_match(rule, call, commands, paths)
                if found is not None and not found.unsure:
                    return found
                unsure = unsure or found
            if unsure is not None:
                return unsure
        # A workspace's allow rules never let a command on this machine run unasked: only
        # your own config or flags can (they are yours to give, as --yes is).
        allows = [
            r
            for r in rules
            if r.action == "allow" and (call.container_root or not r.from_workspace)
        ]
        if call.tool == SHELL:  # a plain line, each command covered by one allow or another
            if not plain(str(call.arguments.get("command", ""))):
                return None
            if not call.container_root and _git_runs_programs(commands, call.workspace):
                return None  # the shell policy's own reason to ask stands
            ran = [s for s in commands if not s.wraps]
            covering = [
                next((r for r in allows if _allows(r, call, [s], paths)), None) for s in ran
            ]
            return Match(covering[0]) if ran and all(covering) and covering[0] else None
        return next((Match(r) for r in allows if _allows(r, call, commands, paths)), None)


def _git_runs_programs(commands: list[Simple], workspace: Path) -> bool:
    """A git command in a repository whose config names programs git runs on its own
    (core.fsmonitor): on this machine it is asked about, whatever an allow rule says."""
    ran_git = any(s.words[:1] == ("git",) for s in commands)
    return ran_git and bool(repository_programs(os.path.realpath(workspace)))


def _refusing_match(
    rule: Rule, call: Call, commands: list[Simple], paths: list[str]
) -> Match | None:
    """Whether a deny or ask rule holds the call: any command of its line, any reading
    of its path. Unsure when a command's unknown rest could make it match."""
    if rule.pattern is None:
        return Match(rule)
    if call.tool == SHELL:
        unsure = None
        for simple in commands:
            verdict = _command_matches(rule.pattern, simple)
            if verdict == "yes" and simple.guess:
                verdict = "maybe"
            if verdict == "yes":
                return Match(rule, part=str(simple))
            if verdict == "maybe":
                unsure = unsure or Match(rule, unsure=True, part=str(simple))
        return unsure
    if call.tool == DELEGATE:
        profile = str(call.arguments.get("profile", ""))
        return Match(rule) if fnmatch.fnmatchcase(profile, rule.pattern) else None
    return Match(rule) if any(_path_matches(rule.pattern, p) for p in paths) else None


def _allows(rule: Rule, call: Call, commands: list[Simple], paths: list[str]) -> bool:
    """Whether an allow rule covers the whole call: every command it runs (a wrapper's by
    what it runs), every reading of its path."""
    if rule.pattern is None:
        return True
    if call.tool == SHELL:
        ran = [s for s in commands if not s.wraps]
        return bool(ran) and all(
            _command_matches(rule.pattern, s, exact=True) == "yes" and s.whole for s in ran
        )
    if call.tool == DELEGATE:
        return fnmatch.fnmatchcase(str(call.arguments.get("profile", "")), rule.pattern)
    return bool(paths) and all(_path_matches(rule.pattern, p) for p in paths)


def _command_matches(
    pattern: str, simple: Simple, *, exact: bool = False
) -> Literal["yes", "no", "maybe"]:
    """Whether the command is what the pattern names. For a deny or an ask, short
    options are read as bash's programs read them (`rm -fr` and `rm -r -f` are `rm
    -rf`); an allow (`exact`) covers the words as written, and only those unless the
    pattern ends in `:*` (an option can write a file or run a program)."""
    text = " ".join(simple.words)
    if _GLOB.search(pattern.removesuffix(":*")):
        if fnmatch.fnmatchcase(text, pattern):
            return "yes"
        head = _GLOB.split(pattern, 1)[0]  # the glob's literal start
        compatible = text.startswith(head) or head.startswith(text)
        return "maybe" if not simple.whole and compatible else "no"
    try:
        wanted = shlex.split(pattern.removesuffix(":*"))
    except ValueError:
        wanted = pattern.removesuffix(":*").split()
    known = list(simple.words)
    if not exact and wanted and known:
        (name, flags, rest), (has, has_flags, has_rest) = _options(wanted), _options(known)
        if name == has and flags <= has_flags and has_rest[: len(rest)] == rest:
            return "yes"
        return (
            "maybe"
            if not simple.whole and name == has and rest[: len(has_rest)] == has_rest
            else "no"
        )
    if exact and not pattern.endswith(":*"):  # an allow covers these words, no more
        return "yes" if known == wanted else "no"
    if known[: len(wanted)] == wanted:
        return "yes"
    if not simple.whole and wanted[: len(known)] == known:
        return "maybe"
    return "no"


def _options(words: list[str]) -> tuple[str, set[str], list[str]]:
    """A command as its program reads it: its name, the single-letter options it was
    given wherever they stand (`-rf`, `-r -f`), and its other words in order."""
    flags: set[str] = set()
    rest: list[str] = []
    for i, word in enumerate(words[1:], 1):
        if word == "--":
            rest += words[i + 1 :]
            break
        if _SHORT.fullmatch(word):
            flags.update(f"-{letter}" for letter in word[1:])
        else:
            rest.append(word)
    return words[0], flags, rest


@lru_cache(maxsize=256)
def _commands(command: str) -> list[Simple]:
    return simple_commands(command) if command.strip() else []


def _paths(call: Call) -> list[str]:
    """The call's path inside the workspace as the tool will read it: as written, as its
    links resolve (workers/tools/workspace.py's own `resolve`), and for a read of a path
    that is not there, the file the tool shows instead (`moved`). An allow must cover
    each; a deny needs one. A path the tool refuses (outside the workspace) is kept as
    written."""
    raw = str(call.arguments.get("path", ".")).strip() or "."
    root = call.container_root
    if root and raw.startswith("/"):  # the container's view of the same files
        normal = "/" + posixpath.normpath(raw).lstrip("/")
        if normal == root or normal.startswith(root + "/"):
            raw = normal[len(root) :].lstrip("/") or "."
    workspace = Path(os.path.realpath(call.workspace))
    written = posixpath.normpath(raw)
    if written.startswith(str(workspace).rstrip("/") + "/"):
        written = written[len(str(workspace)) :].lstrip("/")
    found = [written]
    if root:  # links are followed as the container follows them: `/workspace/…` is here
        found.append(_followed_in_container(workspace, written, root) or "")
    try:
        real = resolve(workspace, raw)
        found.append(os.path.relpath(real, workspace))
        if call.tool in ("read_file", "list_dir"):
            instead = moved(workspace, raw, folder=call.tool == "list_dir")
            found += [posixpath.normpath(instead)] if instead else []
    except ToolError:
        pass
    return list(dict.fromkeys(found))


def _followed_in_container(workspace: Path, rel: str, root: str) -> str | None:
    """`rel` with its links followed as a container that mounts the workspace at `root`
    follows them; None where they lead out of it (the tool refuses that) or go round."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    done: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not done:
                return None
            done.pop()
            continue
        here = workspace.joinpath(*done, part)
        if not here.is_symlink():
            done.append(part)
            continue
        hops += 1
        target = os.readlink(here)
        if hops > 40:
            return None
        if target.startswith("/"):
            inside = "/" + posixpath.normpath(target).lstrip("/")
            if inside != root and not inside.startswith(root + "/"):
                return None
            done, parts = [], [*inside[len(root) :].split("/"), *parts]
        else:
            parts = [*target.split("/"), *parts]
    return "/".join(done) or "."


def _path_matches(pattern: str, path: str) -> bool:
    """`**` any folders (none too; `dir/**` is the folder and all in it), `*` and `?`
    within one name; a pattern without `/` matches a name in any folder."""
    pattern = pattern.removeprefix("./").rstrip("/")
    if "/" not in pattern:
        return any(glob_regex(pattern).fullmatch(part) for part in path.split("/"))
    if pattern.endswith("/**") and path == pattern[: -len("/**")]:
        return True
    return bool(glob_regex(pattern).fullmatch(path))


@dataclass
class RuleFiles:
    """The rules as read from each place, in order (the user's config first)."""

    rules: list[Rule] = field(default_factory=list)

    def add(self, lists: dict[str, Any], source: str, *, from_workspace: bool = False) -> None:
        for action in ACTIONS:
            for text in lists.get(action, []) or []:
                rule = parse_rule(text, action, source, from_workspace=from_workspace)
                self.rules.append(rule)

    def rule_set(self) -> RuleSet:
        return RuleSet(tuple(self.rules))
