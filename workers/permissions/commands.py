"""A shell command as the simple commands bash will run, for rules to match.

Every simple command anywhere in the line counts: in pipelines and lists, in subshells,
loops, functions and `$(…)`. What a command runs besides itself is looked through: a
wrapper (`env`, `env -S '…'`, `timeout 60`, `nice`, `xargs`, `sudo`, `coproc`), a shell
given its script (`bash -c '…'`, `sh -ec '…'`), `eval`, and `find -exec … ;`. A program
named by its path is also judged by its name (`/bin/rm` is `rm`), and git by its
subcommand (`git -C dir push` is `git push`). A word bash expands first (`$X`, `*.py`,
`$(…)`), a shell or `source` reading a stream, an alias, or a line bash reads otherwise
than the parser (a backslash-newline) ends what is known: a rule that might still match
cannot be ruled out before the command runs. A quoted argument that reads as a command
line (`trap 'git push' EXIT`, `su -c '…'`) is looked into too, as a may-be.

An allow rule needs more: `plain` says whether the line is only commands and their
literal words, with no wrapper, redirection to a file, assignment or substitution, so
that what the allow rule names is all that runs.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from tree_sitter import Node

from workers.permissions.bash_words import (
    AT_OPERATOR,
    GIT_PROGRAM_KEYS,
    GIT_UNKNOWN,
    GIT_VALUED,
    INDEX,
    KEYWORDS,
    MAX_DEPTH,
    PLAIN,
    REDEFINERS,
    RISKY_PREFIXES,
    RISKY_VARIABLES,
    SHELLS,
    SOURCES,
    STREAMS,
    UNDERSTOOD,
    WRAPPERS,
)
from workers.tools.bash_reading import literal, misread, parse


@dataclass(frozen=True)
class Simple:
    """One simple command: its words as bash passes them, up to the first it would expand."""

    words: tuple[str, ...]
    whole: bool = True
    """Every word is known; False: bash expands `words[len(words)]` before it runs, or
    adds words of its own (`xargs`)."""
    wraps: bool = False
    """A view for deny and ask rules only: a wrapper whose command is listed after it,
    or this command under its plain name (`/bin/rm` as `rm`, `git -C x push` as `git
    push`). An allow rule must cover the commands as written."""
    guess: bool = False
    """Read out of a quoted argument (`trap 'git push' EXIT`): it may run, or may be a
    message that only names a command; a rule it matches asks, never refuses outright."""

    def __str__(self) -> str:
        return shlex.join(self.words) + ("" if self.whole else " …")


OPAQUE = Simple((), whole=False)
"""A command nothing is known of (a line that does not parse, a shell reading stdin)."""


def simple_commands(command: str, depth: int = 0) -> list[Simple]:
    """Every simple command in `command`, and what each runs; [OPAQUE] when the line
    does not parse as bash would read it."""
    if depth > MAX_DEPTH or misread(command):  # bash reads it otherwise than its tree
        return [OPAQUE]
    tree = parse(command)
    if tree.root_node.has_error:
        return [OPAQUE]
    found: list[Simple] = []
    _walk(tree.root_node, found, depth)
    return found


def plain(command: str) -> bool:
    """Only commands and their literal words (redirections to /dev/null or another
    descriptor aside): nothing runs but what the words name."""
    if misread(command):
        return False
    tree = parse(command)
    if tree.root_node.has_error or not _plain(tree.root_node):
        return False
    ran = [s for s in simple_commands(command) if not s.wraps]
    return bool(ran) and all(s.whole and not _runs_another(s) for s in ran)


def _plain(node: Node) -> bool:
    if node.is_named and node.type not in PLAIN:
        return False
    if node.type == "file_redirect":  # to /dev/null, or a copy of a descriptor (`2>&1`)
        target = node.child_by_field_name("destination")
        text = (target.text or b"").decode() if target is not None else ""
        operators = {c.type for c in node.children if not c.is_named}
        duplicates = operators <= {">&", "<&"} and (text.isdigit() or text == "-")
        if not (duplicates or (text == "/dev/null" and operators <= {">", ">>", "&>", "2>"})):
            return False
    return all(_plain(child) for child in node.children)


def _runs_another(simple: Simple) -> bool:
    name = simple.words[0].rsplit("/", 1)[-1] if simple.words else ""
    return (
        name in WRAPPERS
        or name in SHELLS
        or name in SOURCES
        or name in ("eval", "alias", "trap", "find", "builtin", "fc", "mapfile", "readarray")
    )


def _walk(node: Node, found: list[Simple], depth: int) -> None:
    if _unread(node):  # bash may run more here than the words say: nothing is ruled out
        found.append(OPAQUE)
    if node.type == "command":
        found.extend(_looked_through(_words(node), depth))
    for child in node.children:
        _walk(child, found, depth)


def _unread(node: Node) -> bool:
    """Syntax whose running the words do not show: arithmetic (which runs `$(…)` in an
    array subscript), arrays, declarations, parameter expansions beyond `${NAME}`
    (`${x@P}`, `${x:=`…`}`), a literal that bash may evaluate later (`'a[$(…)]'`, an
    exported function), an assignment to a variable that makes a program run another
    (GIT_SSH_COMMAND, LD_PRELOAD, PS4), and anything the parser does not know."""
    if not node.is_named:
        return node.type == "((" or node.type == "$(("
    text = (node.text or b"").decode("utf-8", errors="replace")
    if node.type not in UNDERSTOOD:
        return True
    if node.type == "expansion":
        return not _harmless_expansion(text)
    if node.type == "subscript":  # an index bash evaluates as arithmetic, outside ${a[@]}
        return (
            node.parent is None
            or node.parent.type != "expansion"
            or not _harmless_expansion((node.parent.text or b"").decode("utf-8", errors="replace"))
        )
    if node.type in ("raw_string", "string_content", "word", "ansi_c_string"):
        return "$(" in text or "`" in text or "BASH_FUNC_" in text
    if node.type == "variable_assignment":
        name = node.child_by_field_name("name")
        return name is not None and _risky_variable((name.text or b"").decode())
    return False


def _harmless_expansion(text: str) -> bool:
    """`${NAME}`, `${NAME:-word}`, `${arr[@]}`, `${#NAME}`…: nothing in it runs. Not a
    command inside (which the parser may not see), an indirection (`${!ref}`), a
    transformation (`${x@P}` expands a prompt), or an index bash evaluates."""
    if "`" in text or "$(" in text or text.startswith("${!") or AT_OPERATOR.search(text):
        return False
    return all(index in ("@", "*") or index.isdigit() for index in INDEX.findall(text))


def _risky_variable(name: str) -> bool:
    return name.startswith(RISKY_PREFIXES) or name in RISKY_VARIABLES


def _words(node: Node) -> Simple:
    name = node.child_by_field_name("name")
    parts = [name.named_children[0]] if name is not None and name.named_child_count == 1 else []
    if name is None or not parts:
        return OPAQUE
    words: list[str] = []
    for part in [*parts, *node.children_by_field_name("argument")]:
        value = literal(part)  # None for a glob, split over pieces too (`[-]rf`)
        if value is None:
            return Simple(tuple(words), whole=False)
        words.append(value)
    return Simple(tuple(words))


def _looked_through(simple: Simple, depth: int) -> list[Simple]:
    """The command, and what it runs: each inner command stands for itself."""
    words = list(simple.words)
    if not words:
        return [simple]
    name = words[0].rsplit("/", 1)[-1]
    found = [simple]
    if name != words[0]:  # `/bin/rm` is `rm` to a deny rule
        found.append(Simple((name, *words[1:]), simple.whole, wraps=True))
    if (name in KEYWORDS and name not in ("time", "coproc")) or words[1:2] in (["{"], ["!"]):
        return [*found, OPAQUE]
    if name in REDEFINERS or (name in SOURCES and not _reads_a_file(words[1:], simple)):
        return [*found, OPAQUE]  # what runs next is not what is written
    if name in SHELLS:
        found += _shell(words[1:], simple, depth)
    elif name == "eval":
        found += simple_commands(" ".join(words[1:]), depth + 1) if simple.whole else [OPAQUE]
    elif name == "find":
        found += [s for inner in _find_runs(simple) for s in _looked_through(inner, depth + 1)]
    elif name == "git":
        found += _git(simple)
    elif name in WRAPPERS:
        found += _wrapped(name, words[1:], simple, depth)
    elif name in ("npm", "pnpm", "yarn") and words[1:2] in (["exec"], ["dlx"], ["x"]):
        found += _wrapped("npx", words[2:], simple, depth)
    found += _quoted_lines(words[1:], depth)
    return found


def _reads_a_file(args: list[str], simple: Simple) -> bool:
    return bool(args) and simple.whole and not args[0].startswith(STREAMS)


def _shell(args: list[str], simple: Simple, depth: int) -> list[Simple]:
    """A shell's script: the word after an option holding `c` (`-c`, `-ec`, `-lc`);
    none, or a stream for its file, and it reads commands nobody has seen."""
    for i, arg in enumerate(args):
        if arg == "--":
            continue
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
            rest = [a for a in args[i + 1 :] if a != "--"]
            if rest and simple.whole:
                return simple_commands(rest[0], depth + 1)
            return [OPAQUE]
        if not arg.startswith(("-", "+")):
            return [OPAQUE] if arg.startswith(STREAMS) else []  # a script file
    return [OPAQUE]  # commands from stdin


def _wrapped(name: str, args: list[str], simple: Simple, depth: int) -> list[Simple]:
    if name == "env" and (split := _split_string(args)) is not None:
        return simple_commands(split, depth + 1) if simple.whole else [OPAQUE]
    # a variable that makes a program run another (GIT_SSH_COMMAND): what runs is unknown
    risky = (
        [OPAQUE] if name == "env" and any(_risky_variable(a.split("=")[0]) for a in args) else []
    )
    inner = _after_options(args, WRAPPERS[name], name)
    if inner is None:  # its command is past what is known
        return [] if simple.whole else [OPAQUE]
    if not inner:
        return []
    whole = simple.whole and name != "xargs"  # xargs adds words read from stdin
    return [*risky, *_looked_through(Simple(tuple(inner), whole), depth + 1)]


def _split_string(args: list[str]) -> str | None:
    """`env -S 'CMD ARGS' MORE`: the command line env splits and runs, or None."""
    for i, arg in enumerate(args):
        if arg in ("-S", "--split-string"):
            value, rest = (args[i + 1] if i + 1 < len(args) else ""), args[i + 2 :]
        elif arg.startswith("--split-string="):
            value, rest = arg.split("=", 1)[1], args[i + 1 :]
        elif arg.startswith("-S"):
            value, rest = arg[2:], args[i + 1 :]
        else:
            continue
        return " ".join([value, *map(shlex.quote, rest)])
    return None


def _after_options(args: list[str], valued: frozenset[str], name: str) -> list[str] | None:
    """The wrapped command's words: past the wrapper's options (and `env`'s NAME=value,
    `timeout`'s duration); None when none is left of what is known."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
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


def _git(simple: Simple) -> list[Simple]:
    """git with its options before the subcommand dropped: `git -C x push` is `git push`.
    Given `-c` (which can define an alias), a subcommand that is not one of git's own
    might be any: an alias never hides one of git's own commands."""
    words, i, configured = list(simple.words), 1, False
    while i < len(words) and words[i].startswith("-"):
        configured = configured or words[i].startswith(GIT_UNKNOWN)
        i += 2 if words[i] in GIT_VALUED else 1
    if i > len(words):  # a valued option's value is past what is known
        return [Simple(("git",), whole=False, wraps=True)]
    found = [Simple(("git", *words[i:]), simple.whole, wraps=True)]
    # `-c` can name a program git runs (core.fsmonitor, core.sshCommand) or an alias;
    # `git config` can set one for later: what runs then is not in these words.
    if configured or (
        words[i : i + 1] == ["config"]
        and any(w.startswith(GIT_PROGRAM_KEYS) for w in words[i + 1 :])
    ):
        found.append(OPAQUE)
    return found


def _quoted_lines(args: list[str], depth: int) -> list[Simple]:
    """An argument that reads as a command line (`trap 'git push' EXIT`): its commands,
    as may-bes (a message that only mentions a command is no command)."""
    found = []
    for arg in args:
        if any(c in arg for c in " ;|&\n") and depth < MAX_DEPTH:
            for inner in simple_commands(arg, depth + 1):
                if inner.words:
                    found.append(Simple(inner.words, inner.whole, wraps=True, guess=True))
    return found
