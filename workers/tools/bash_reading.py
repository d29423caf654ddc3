"""How bash reads a command line's words, for the checks that judge it by its syntax tree
(the host shell policy, the permission rules, the run's check chooser).

tree-sitter's bash grammar gives the tree; `literal` says what a word is once bash has
removed quotes and escapes, or None where bash would expand it first; `misread` says
where bash would read the line otherwise than the tree shows, so that a check judging
the tree judges nothing and asks.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from functools import lru_cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Tree

# What follows `{` in a brace expansion: a list or a range, then `}`.
_BRACES = re.compile(r"[^}]*(,|\.\.)[^}]*\}")
_ESCAPED = re.compile(r"\\.")
# Control characters, format characters and every kind of space but the three above.
_ODD_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})


@lru_cache(maxsize=1)
def _parser() -> Parser:
    return Parser(Language(tree_sitter_bash.language()))


def parse(command: str) -> Tree:
    """The command's bash syntax tree (tree-sitter)."""
    return _parser().parse(command.encode("utf-8"))


def misread(command: str) -> str | None:
    """Why bash would read `command` otherwise than its syntax tree shows, or None: the
    checker and the permission rules judge the tree, so such a line is judged by
    neither. A backslash-newline (bash joins the words); a space the grammar splits on
    and bash does not; words after a redirection's target (the grammar's target, bash's
    arguments: `find . 2>/dev/null -delete`); two words with nothing between them (one
    to bash: `[\\x-]delete`); a here-document whose end bash finds elsewhere."""
    if "\\\n" in command:
        return "it has a backslash-newline, which bash removes before it runs"
    if odd := _odd_spacing(command):
        return (
            f"it has the character U+{ord(odd):04X}, which bash and the checker would read "
            "differently (a word break to one, part of a word to the other)"
        )
    return _misread_node(parse(command).root_node)


def _misread_node(node: Node) -> str | None:
    if node.type == "file_redirect" and len(node.children_by_field_name("destination")) > 1:
        return (
            "words after a redirection's target are the command's arguments to bash, "
            "which the checker would take for the target"
        )
    if node.type == "command":
        words = [
            child
            for child in node.children
            if child.type not in ("file_redirect", "herestring_redirect", "variable_assignment")
        ]
        for before, word in itertools.pairwise(words):
            if word.start_byte == before.end_byte:
                return (
                    f"`{text_of(before)}{text_of(word)}` is one word to bash, which the checker "
                    "reads as two"
                )
    if node.type == "heredoc_redirect":
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        end = next((c for c in node.children if c.type == "heredoc_end"), None)
        if start is not None and (end is None or text_of(end).lstrip("\t") != _delimiter(start)):
            return (
                "a here-document whose end line bash finds elsewhere than the checker does "
                "(its delimiter is partly quoted)"
            )
    return next(filter(None, (_misread_node(child) for child in node.children)), None)


def _odd_spacing(command: str) -> str | None:
    """A control character or space other than space, tab and newline: the grammar reads
    a carriage return, a form feed or a vertical tab as a word break where bash does not
    (`-name x<CR># -o -delete` hides `-delete` in a comment)."""
    return next(
        (
            char
            for char in command
            if char not in " \t\n" and unicodedata.category(char) in _ODD_CATEGORIES
        ),
        None,
    )


def _delimiter(start: Node) -> str:
    """A here-document's delimiter as bash takes it: its word with quotes and
    backslashes removed (`E"O"F` ends at the line `EOF`)."""
    return re.sub(r"\\(.)|['\"]", lambda m: m.group(1) or "", text_of(start))


def literal(node: Node) -> str | None:
    """The word as bash passes it to the command, after quote removal; None when bash
    would expand it (variables, substitutions, globs, braces, tilde) first."""
    text = text_of(node)
    match node.type:
        case "word" | "number":
            return _unescape_word(text)
        case "raw_string":
            return text[1:-1]
        case "string":
            if any(c.is_named and c.type != "string_content" for c in node.children):
                return None
            return re.sub(r'\\([$`"\\\n])', r"\1", text[1:-1])
        case "concatenation":
            unquoted = "".join(text_of(c) for c in node.children if c.type == "word")
            plain = _ESCAPED.sub("_", unquoted)  # `\}` closes no brace
            if "{" in plain and _BRACES.match(plain[plain.index("{") + 1 :]):
                return None  # brace expansion split over several words: `{a,b}.py`
            if _split_bracket_glob(node):
                return None  # `[-]delete`: bash may match it to a file named `-delete`
            parts = [literal(child) for child in node.children]
            return None if any(p is None for p in parts) else "".join(p or "" for p in parts)
        case _:
            return None


def _split_bracket_glob(node: Node) -> bool:
    """An unquoted `[` with an unquoted `]` after it, over a word the parser split into
    pieces: a bracket glob, whatever is quoted between them (`[' ']` matches a space)."""
    unquoted = "".join(
        re.sub(r"\\.", "", text_of(c)) if c.type in ("word", "number") else " "
        for c in node.children
    )
    opened = unquoted.find("[")
    return opened >= 0 and "]" in unquoted[opened + 1 :]


def _unescape_word(text: str) -> str | None:
    """An unquoted word with its backslashes removed; None where bash would expand it."""
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
            continue
        rest = text[i + 1 :]
        if (
            char in "*?$`"
            or (char == "[" and "]" in rest)  # a bracket glob
            or (char == "{" and _BRACES.match(_ESCAPED.sub("_", rest)))  # `{}` is literal
            or (char == "~" and (i == 0 or text[i - 1] in "=:"))  # tilde expansion
        ):
            return None
        out.append(char)
        i += 1
    return "".join(out)


def text_of(node: Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")
