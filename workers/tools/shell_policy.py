"""Which host shell commands run without asking: parsed, never pattern-matched.

The command is parsed with tree-sitter's bash grammar. It is allowed only when every
simple command in it — in pipelines, lists, subshells and `$(…)` alike — is on the
read-only allowlist and no redirection writes a file. Anything the checker does not
understand needs approval: the policy fails closed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str = ""


ArgCheck = Callable[[list[str]], str | None]
"""Returns why these arguments make the command unsafe, or None when they are fine."""


def _always(_args: list[str]) -> str | None:
    return None


def _find(args: list[str]) -> str | None:
    risky = {
        "-exec",
        "-execdir",
        "-ok",
        "-okdir",
        "-delete",
        "-fprint",
        "-fprint0",
        "-fprintf",
        "-fls",
    }
    hit = next((a for a in args if a in risky), None)
    return f"find {hit} can change files or run commands" if hit else None


def _sort(args: list[str]) -> str | None:
    if any(a.startswith(("-o", "--output", "--compress-program")) for a in args):
        return "sort -o writes a file and --compress-program runs one"
    return None


def _uniq(args: list[str]) -> str | None:
    # `uniq IN OUT` writes OUT.
    operands = [a for a in args if not a.startswith("-")]
    return "uniq with two file names writes the second" if len(operands) > 1 else None


def _rg(args: list[str]) -> str | None:
    return (
        "rg --pre runs a program on every file"
        if any(a.startswith("--pre") for a in args)
        else None
    )


_GIT_READ = {
    "status",
    "diff",
    "log",
    "show",
    "blame",
    "ls-files",
    "rev-parse",
    "grep",
    "shortlog",
    "describe",
}


def _git(args: list[str]) -> str | None:
    if not args:
        return "git without a subcommand"
    sub, rest = args[0], args[1:]
    if sub.startswith("-"):
        # `git -c core.pager=… log` and friends can run anything.
        return "git options before the subcommand are not on the allowlist"
    if sub == "branch":
        listing = all(
            a in {"-a", "-r", "-v", "-vv", "--list", "--all", "--show-current"} for a in rest
        )
        return None if listing else "git branch with arguments can change branches"
    if sub not in _GIT_READ:
        return f"git {sub} is not a read-only git command"
    if any(
        a.startswith(("--output", "--ext-diff", "--textconv", "--open-files-in-pager", "-O"))
        for a in rest
    ):
        return "that git option writes files or runs external programs"
    return None


def _python(args: list[str]) -> str | None:
    return None if args[:2] == ["-m", "pytest"] else "only `python -m pytest` runs without approval"


ALLOWLIST: dict[str, ArgCheck] = {
    **{
        name: _always
        for name in (
            "ls",
            "cd",
            "cat",
            "head",
            "tail",
            "wc",
            "grep",
            "egrep",
            "fgrep",
            "pwd",
            "echo",
            "true",
            "false",
            "cut",
            "tr",
            "diff",
            "cmp",
            "file",
            "stat",
            "du",
            "df",
            "which",
            "basename",
            "dirname",
            "realpath",
            "readlink",
            "nl",
            "sha256sum",
            "md5sum",
            "test",
            "[",
            "pytest",
        )
    },
    "find": _find,
    "sort": _sort,
    "uniq": _uniq,
    "rg": _rg,
    "git": _git,
    "python": _python,
    "python3": _python,
}

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
_HARMLESS_TARGETS = {"/dev/null", "/dev/stdout", "/dev/stderr"}


@lru_cache(maxsize=1)
def _parser() -> Parser:
    return Parser(Language(tree_sitter_bash.language()))


def check(command: str) -> Verdict:
    """Allowed when every part of the command is read-only; else the reason to ask."""
    if not command.strip():
        return Verdict(False, "empty command")
    tree = _parser().parse(command.encode("utf-8"))
    problem = _check_node(tree.root_node)
    return Verdict(problem is None, problem or "")


def _check_node(node: Node) -> str | None:
    if node.is_named and node.type not in _STRUCTURE:
        return f"contains {node.type.replace('_', ' ')}, which the allowlist does not cover"
    if node.has_error and node.type == "program" and not node.children:
        return "the command could not be parsed"
    if node.type == "command":
        problem = _check_command(node)
        if problem:
            return problem
    if node.type == "file_redirect":
        problem = _check_redirect(node)
        if problem:
            return problem
    for child in node.children:
        if child.type == "ERROR" or child.is_missing:
            return "the command could not be parsed"
        problem = _check_node(child)
        if problem:
            return problem
    return None


def _check_command(node: Node) -> str | None:
    name_node = node.child_by_field_name("name")
    if (
        name_node is None
        or name_node.named_child_count != 1
        or name_node.named_children[0].type != "word"
    ):
        return "the command name is not a plain word"
    name = _text(name_node)
    rule = ALLOWLIST.get(name)
    if rule is None:
        return f"`{name}` is not on the read-only allowlist"
    args = [_unquote(arg) for arg in node.children_by_field_name("argument")]
    return rule(args)


def _check_redirect(node: Node) -> str | None:
    operator = next((c.type for c in node.children if not c.is_named), "")
    target = node.child_by_field_name("destination")
    destination = _unquote(target) if target is not None else ""
    if operator == ">&" and (destination.isdigit() or destination == "-"):
        return None  # 2>&1 duplicates a descriptor; `>& file` writes one
    if operator not in _WRITING_REDIRECTS | {">&"} or destination in _HARMLESS_TARGETS:
        return None
    return f"the redirection `{operator}` writes a file"


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")


def _unquote(node: Node) -> str:
    text = _text(node)
    if node.type in ("string", "raw_string") and len(text) >= 2:
        return text[1:-1]
    return text
