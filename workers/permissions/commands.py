"""A shell command as the simple commands bash will run, for rules to match.

Every simple command anywhere in the command line counts: in pipelines and lists, in
subshells, loops, functions and `$(…)`. A wrapper that runs the command after it
(`env`, `timeout 60`, `nice`, `xargs`, `sudo`, `find -exec … ;`, `bash -c '…'`, `eval`)
is looked through, and git's own options before its subcommand (`git -C dir push`) are
dropped, so a rule about `git push` is about every way of writing it. A word bash would
expand first (`$X`, `*.py`, `$(…)`) ends what is known of its command: a rule that might
still match it cannot be ruled out before it runs.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from tree_sitter import Node

from workers.tools.shell_policy import literal, parse


@dataclass(frozen=True)
class Simple:
    """One simple command: its words as bash passes them, up to the first it would expand."""

    words: tuple[str, ...]
    whole: bool = True
    """Every word is known; False: bash expands `words[len(words)]` before it runs."""
    wraps: bool = False
    """A wrapper whose command is known and listed after it (`timeout 60 npm test`): an
    allow rule need only cover what it runs."""

    def __str__(self) -> str:
        return shlex.join(self.words) + ("" if self.whole else " …")


OPAQUE = Simple((), whole=False)
"""A command nothing is known of (a line that does not parse, a shell reading stdin)."""

# Wrappers that run the command after their own options, and the options that take a value.
_WRAPPERS: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "command": frozenset(),
    "exec": frozenset({"-a"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "nohup": frozenset(),
    "setsid": frozenset(),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}),
    "doas": frozenset({"-u", "-C"}),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "timeout": frozenset({"-k", "--kill-after", "-s", "--signal"}),
    "xargs": frozenset(
        {"-a", "-d", "-E", "-e", "-I", "-i", "-L", "-l", "-n", "-P", "-s", "--delimiter"}
    ),
}
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
# git's options before its subcommand, and those that take a value.
_GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"})
_MAX_DEPTH = 8


def simple_commands(command: str, depth: int = 0) -> list[Simple]:
    """Every simple command in `command`, wrappers looked through; [OPAQUE] when the line
    does not parse (bash might read it otherwise than the parser did)."""
    tree = parse(command)
    if tree.root_node.has_error or depth > _MAX_DEPTH:
        return [OPAQUE]
    found: list[Simple] = []
    _walk(tree.root_node, found, depth)
    return found


def _walk(node: Node, found: list[Simple], depth: int) -> None:
    if node.type == "command":
        found.extend(_looked_through(_words(node), depth))
    for child in node.children:
        _walk(child, found, depth)


def _words(node: Node) -> Simple:
    name = node.child_by_field_name("name")
    parts = [name.named_children[0]] if name is not None and name.named_child_count == 1 else []
    if name is None or not parts:
        return OPAQUE
    words: list[str] = []
    for part in [*parts, *node.children_by_field_name("argument")]:
        value = literal(part)
        if value is None:
            return Simple(tuple(words), whole=False)
        words.append(value)
    return Simple(tuple(words))


def _looked_through(simple: Simple, depth: int) -> list[Simple]:
    """The command, and what it runs when it is a wrapper (its inner commands stand for it)."""
    words = list(simple.words)
    if not words:
        return [simple]
    name = words[0].rsplit("/", 1)[-1]
    if name in _SHELLS and "-c" in words[1:]:
        script = words[words.index("-c", 1) + 1 :]
        if not script:
            return [simple] if simple.whole else [OPAQUE]
        return [_wrapper(simple), *simple_commands(script[0], depth + 1)]
    if name in _SHELLS and (len(words) == 1 or "-s" in words[1:]):
        return [simple, OPAQUE]  # reads its commands from stdin
    if name == "eval":
        if not simple.whole:
            return [simple, OPAQUE]
        return [_wrapper(simple), *simple_commands(" ".join(words[1:]), depth + 1)]
    if name == "find":
        return [simple, *_find_runs(simple)]
    if name == "git":
        return [_git(simple)]
    if name in _WRAPPERS:
        inner = _after_options(words[1:], _WRAPPERS[name], name)
        if inner is None:  # its command is past what is known
            return [simple, OPAQUE] if not simple.whole else [simple]
        if not inner:
            return [simple]
        return [_wrapper(simple), *_looked_through(Simple(tuple(inner), simple.whole), depth)]
    return [simple]


def _wrapper(simple: Simple) -> Simple:
    return Simple(simple.words, simple.whole, wraps=True)


def _after_options(args: list[str], valued: frozenset[str], name: str) -> list[str] | None:
    """The wrapped command's words: past the wrapper's options (and `env`'s NAME=value,
    `timeout`'s duration); None when none is left of what is known."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            i += 1
            break
        i += 2 if args[i] in valued else 1
    if name == "env":
        while i < len(args) and "=" in args[i]:
            i += 1
    if name == "timeout" and i < len(args):
        i += 1
    if name == "command" and args[:1] in (["-v"], ["-V"]):
        return []  # a lookup, which runs nothing
    return args[i:] if i < len(args) else None


def _find_runs(simple: Simple) -> list[Simple]:
    """What `find … -exec CMD … ;` (or -execdir, -ok, -okdir) runs for each file."""
    runs: list[Simple] = []
    words = list(simple.words)
    for i, word in enumerate(words):
        if word in ("-exec", "-execdir", "-ok", "-okdir"):
            rest = words[i + 1 :]
            end = next((j for j, w in enumerate(rest) if w in (";", "+")), None)
            runs.append(Simple(tuple(rest[:end]), simple.whole and end is not None))
    return runs


def _git(simple: Simple) -> Simple:
    """git with its options before the subcommand dropped: `git -C x push` is `git push`."""
    words, i = list(simple.words), 1
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in _GIT_VALUED else 1
    if i > len(words):  # a valued option's value is past what is known
        return Simple(("git",), whole=False)
    return Simple(("git", *words[i:]), simple.whole)
