"""Which host shell commands run without asking: judged as bash will run them.

The command is parsed with tree-sitter's bash grammar. It runs without approval only
when every simple command in it — in pipelines, lists and subshells alike — is on the
read-only allowlist with options known to be read-only, every argument is a literal
(quotes and escapes removed, as bash does; any expansion, substitution or glob sends
it to approval), no path argument leads out of the workspace, and no redirection writes
a file. Anything the checker does not understand needs approval: the policy fails closed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from tree_sitter import Node

from workers.tools.bash_reading import literal, misread, parse, text_of
from workers.tools.git_programs import diff_programs_unsaid, repository_programs
from workers.tools.shell_allowlist import (
    ALLOWLIST,
    BRANCH_LISTING,
    FIND_FLAGS,
    FIND_PATH_VALUES,
    FIND_VALUED,
    GIT,
    GIT_READ,
    Options,
)


@dataclass(frozen=True)
class Allowance:
    """Whether a host command runs without asking, and why not."""

    allowed: bool
    reason: str = ""


# Syntax nodes whose meaning the checker understands. Anything else (functions, loops,
# assignments, process substitution, parse errors) is treated as unknown: ask first.
_STRUCTURE = {
    "program",
    "list",
    "pipeline",
    "subshell",
    "compound_statement",
    "redirected_statement",
    "command",
    "command_name",
    "word",
    "string",
    "string_content",
    "raw_string",
    "number",
    "concatenation",
    "simple_expansion",
    "expansion",
    "variable_name",
    "command_substitution",
    "file_redirect",
    "heredoc_redirect",
    "heredoc_start",
    "heredoc_body",
    "heredoc_end",
    "herestring_redirect",
    "file_descriptor",
    "ansi_c_string",
    "comment",
}
_WRITING_REDIRECTS = {">", ">>", "&>", "&>>", ">|", "<>"}
_HARMLESS_PATHS = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/stdin", "-"}


@dataclass
class _Check:
    root: str
    cwds: list[str] = field(default_factory=list)
    """The workspace and every folder a `cd` in the command names: relative paths are
    judged from each."""


def check(command: str, workspace: Path | None = None) -> Allowance:
    """Allowed when every part of the command only reads, inside `workspace` (default:
    the current folder, where host commands run); else the reason to ask."""
    if not command.strip():
        return Allowance(False, "empty command")
    if why := misread(command):
        return Allowance(False, why)
    root = os.path.realpath(workspace or Path.cwd())
    tree = parse(command)
    state = _Check(root, [root])
    problem = _check_node(tree.root_node, state)
    return Allowance(problem is None, problem or "")


def _check_node(node: Node, state: _Check) -> str | None:
    if node.is_named and node.type not in _STRUCTURE:
        return f"contains {node.type.replace('_', ' ')}, which the allowlist does not cover"
    if node.has_error and node.type == "program" and not node.children:
        return "the command could not be parsed"
    if node.type in ("command_substitution", "expansion", "simple_expansion"):
        return "it uses a substitution or expansion, whose value cannot be judged before it runs"
    if node.type == "command" and (problem := _check_command(node, state)):
        return problem
    if node.type == "file_redirect" and (problem := _check_redirect(node, state)):
        return problem
    if node.type == "heredoc_redirect" and (problem := _check_heredoc(node)):
        return problem
    for child in node.children:
        if child.type == "ERROR" or child.is_missing:
            return "the command could not be parsed"
        if problem := _check_node(child, state):
            return problem
    return None


def _check_command(node: Node, state: _Check) -> str | None:
    name_node = node.child_by_field_name("name")
    if name_node is None or name_node.named_child_count != 1:
        return "the command name is not a plain word"
    name = literal(name_node.named_children[0])
    if name is None:
        return "the command name is not a plain word"
    args = []
    for arg in node.children_by_field_name("argument"):
        value = literal(arg)
        if value is None:
            return (
                f"an argument of `{name}` ({text_of(arg)}) has an expansion, substitution or "
                "glob, whose value cannot be judged before it runs"
            )
        args.append(value)
    if name == "find":
        problem, paths = _find(args)
    elif name == "git":
        problem, paths = _git(args)
        if problem is None and (programs := repository_programs(state.root)):
            return (
                f"the repository's config names programs git runs on its own ({programs}); "
                "a git command here needs your approval"
            )
    elif name in ("python", "python3", "pytest"):
        return f"`{name}` runs the project's own code (tests, conftest.py), which can do anything"
    elif (options := ALLOWLIST.get(name)) is not None:
        problem, paths = _options(name, options, args)
    else:
        return f"`{name}` is not on the read-only allowlist"
    if problem:
        return problem
    if name == "cd":
        if not paths or paths[-1] == "-":
            return "`cd` without a folder (or `cd -`) leaves the workspace for $HOME or $OLDPWD"
        # Each cd moves from wherever an earlier one may have led: judge from all of them.
        state.cwds += [os.path.realpath(os.path.join(cwd, paths[-1])) for cwd in state.cwds]
    for path in paths:
        if where := _outside(path, state):
            return f"`{name}` would reach {path!r}, {where}"
    return None


def _options(name: str, spec: Options, args: list[str]) -> tuple[str | None, list[str]]:
    """Why the options are not known to be read-only (or None), and the path-like words."""
    operands: list[str] = []
    paths: list[str] = []
    pattern_given = False
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            operands += args[i:]
            break
        if not arg.startswith("-") or arg == "-":
            operands.append(arg)
            continue
        if spec.any:
            if refused := _refused_option(arg, spec.refused):
                return f"`{name} {refused}` is not read-only within the workspace", []
            read, gives_pattern, i = _any_option(spec, arg, args, i)
            paths += read
            pattern_given |= gives_pattern
            continue
        if arg.startswith("--"):
            option, has_value, value = arg.partition("=")
            pattern_given |= option in ("--regexp", "--file")
            if option in spec.long and not has_value:
                continue
            if option not in spec.long_valued:
                return f"`{name} {option}` is not known to be read-only", []
            if not has_value and i < len(args):
                value, i = args[i], i + 1
            paths.append(value)
            continue
        if any(re.fullmatch(pattern, arg) for pattern in spec.patterns):
            continue
        for position, letter in enumerate(arg[1:], start=1):
            pattern_given |= letter in "ef" and letter in spec.short_valued
            if letter in spec.short_valued:
                value = arg[position + 1 :]
                if not value and i < len(args):
                    value, i = args[i], i + 1
                paths.append(value)
                break
            if letter not in spec.short:
                return f"`{name} -{letter}` is not known to be read-only", []
    if spec.operands is not None and (problem := spec.operands(operands)):
        return problem, []
    if spec.pattern_first and not pattern_given and operands:
        operands = operands[1:]  # the pattern: a regular expression, not a path
    return None, operands + paths


_GIVES_PATTERN = frozenset({"-e", "--regexp", "-f", "--file"})
"""grep's and rg's options that give the pattern: then the first operand is a path."""


def _any_option(spec: Options, arg: str, args: list[str], i: int) -> tuple[list[str], bool, int]:
    """For a command whose every option reads only (`spec.any`): the paths the option word
    `arg` gives, whether it gives the pattern, and where the next word is (after its
    value, when that is the next word)."""
    if (valued := _valued(arg, spec.takes_value | spec.reads_file)) is None:
        return _value_paths(arg), False, i
    option, value = valued
    if value is None:  # the next word, whatever it looks like
        value, i = (args[i], i + 1) if i < len(args) else ("", i)
    return ([value] if option in spec.reads_file else []), option in _GIVES_PATTERN, i


def _valued(arg: str, valued: frozenset[str]) -> tuple[str, str | None] | None:
    """The option in the word `arg` that takes a value, with the value when the same word
    holds it (None: the next word is it); None when no option in it takes one. In a group
    of single letters (`-if`) the first letter that takes a value takes the rest."""
    if arg.startswith("--"):
        option, equals, value = arg.partition("=")
        option = _spelled_out(option, valued)
        return (option, value if equals else None) if option in valued else None
    for position, letter in enumerate(arg[1:], start=1):
        if f"-{letter}" in valued:
            return f"-{letter}", arg[position + 1 :] or None
    return None


def _spelled_out(option: str, known: frozenset[str]) -> str:
    """A long option as the command reads it: GNU tools take any start of one that no
    other option shares (`--exclude-f` is `--exclude-from`); here, of those `known`."""
    if option in known:
        return option
    starting = [name for name in known if name.startswith(option) and option.startswith("--")]
    return starting[0] if len(starting) == 1 else option


def _refused_option(arg: str, refused: frozenset[str]) -> str | None:
    if arg.startswith("--"):
        option = _spelled_out(arg.partition("=")[0], refused)
        return option if option in refused else None
    return next((f"-{letter}" for letter in arg[1:] if f"-{letter}" in refused), None)


def _find(args: list[str]) -> tuple[str | None, list[str]]:
    paths, i = [], 0
    while i < len(args) and not args[i].startswith("-") and args[i] not in ("!", "(", ")"):
        paths.append(args[i])
        i += 1
    while i < len(args):
        arg = args[i]
        i += 1
        if arg in FIND_FLAGS:
            continue
        if arg in FIND_VALUED and i < len(args):
            if arg in FIND_PATH_VALUES:
                paths.append(args[i])
            i += 1
            continue
        return (
            f"`find {arg}` is not known to be read-only (it may change files or run commands)",
            [],
        )
    return None, paths


def _git(args: list[str]) -> tuple[str | None, list[str]]:
    if not args:
        return "git without a subcommand", []
    sub, rest = args[0], args[1:]
    if sub.startswith("-"):
        # `git -c core.pager=… log` and friends can run anything.
        return "git options before the subcommand are not on the allowlist", []
    if sub not in GIT_READ:
        return f"git {sub} is not a read-only git command", []
    if sub == "branch" and not all(a in BRANCH_LISTING for a in rest):
        return "git branch with arguments can change branches", []
    problem, paths = _options(f"git {sub}", GIT, rest)
    return problem or diff_programs_unsaid(sub, rest), paths


def _check_redirect(node: Node, state: _Check) -> str | None:
    operator = next((c.type for c in node.children if not c.is_named), "")
    target = node.child_by_field_name("destination")
    destination = literal(target) if target is not None else ""
    if destination is None:
        return "a redirection target has an expansion, whose value cannot be judged"
    if operator == ">&" and (destination.isdigit() or destination == "-"):
        return None  # 2>&1 duplicates a descriptor; `>& file` writes one
    if operator in _WRITING_REDIRECTS | {">&"} and destination not in _HARMLESS_PATHS - {"-"}:
        return f"the redirection `{operator}` writes a file"
    if where := _outside(destination, state):
        return f"the redirection would read {destination!r}, {where}"
    return None


def _check_heredoc(node: Node) -> str | None:
    """A here-document whose delimiter is not quoted expands its body as bash runs it:
    backticks there run commands, and the grammar does not parse them."""
    start = next((c for c in node.children if c.type == "heredoc_start"), None)
    body = next((c for c in node.children if c.type == "heredoc_body"), None)
    if start is None or body is None or any(q in text_of(start) for q in "'\"\\"):
        return None
    if any(active in text_of(body) for active in "`$\\"):
        return "a here-document expands `$`, backticks and backslashes in its body before it runs"
    return None


def _value_paths(option: str) -> list[str]:
    """Path-like values inside an option word: `--file=/etc/x`, `-f/etc/x`, `-f../x`."""
    if "=" in option:
        return [option.partition("=")[2]]
    match = re.search(r"[/~.].*", option.lstrip("-"))
    return [match.group(0)] if match else []


def _outside(path: str, state: _Check) -> str | None:
    """Why a path argument leads out of the workspace (or into /proc), or None."""
    if not path or path in _HARMLESS_PATHS:
        return None
    if path.startswith("~"):
        return "a home folder outside the workspace"
    if ".." in path.split("/"):
        return "which climbs out with `..`"
    if path.startswith("/"):
        real = os.path.realpath(path)
        return None if _inside(real, state.root) else "outside the workspace"
    for cwd in state.cwds:
        full = os.path.join(cwd, path)
        if os.path.lexists(full) and not _inside(os.path.realpath(full), state.root):
            return "a link that points outside the workspace"
    return None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
