"""What one file defines and what it refers to: its top-level symbols (classes, functions,
methods, constants) with their lines, and the names it uses.

Python is read with `ast`. Other languages are read with tree-sitter, through the grammar
wheels' own tags queries (the definitions and references each grammar's authors mark),
as aider and GitHub's code navigation do. A file that cannot be mapped says why in one
line (`FileSymbols.problem`): it does not parse, it is binary, generated or too large,
or no grammar reads its language.
"""

from __future__ import annotations

import ast
import functools
import re
import unicodedata
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

# Past this, a file is not mapped: a 50 MB source file is data, or made by a tool; reading
# it would cost every run a second.
MAX_MAPPED_BYTES = 1024 * 1024
# A generated file says so in a comment near its top, in the words Go's tools, protoc
# and Facebook's tools write there (the pattern below); or it is minified: lines this
# long on average.
_GENERATED = re.compile(
    rb"^[ \t]*(?://|#|/\*|\*|--)[^\n]*"
    rb"(?:\bCode generated\b|@generated|\b[Aa]uto-?generated\b|\b[Gg]enerated by\b)",
    re.MULTILINE,
)
MINIFIED_LINE_CHARS = 500
MAX_DEPTH = 256
"""Past this nesting a file is not queried: tree-sitter's tags queries are quadratic in
it (128 KB of nested `[` took 8 s), and code nests far less."""
MAX_BROKEN_BYTES = 16 * 1024
"""A file that does not parse is mapped in part only up to this size: on the error tree
its tags query can take seconds (128 KB of unclosed `[` took 8 s)."""
MATCH_LIMIT = 1024
"""Matches a tags query keeps in progress at once (tree-sitter's own cap on its work)."""
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SUMMARY_CHARS = 120
SAYS = " — "
"""Between a definition and its summary wherever both are shown: what follows it on a
line is the docstring's words, never a file anything showed (workers/guards/citations.py)."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_PROSE_START = re.compile(r"[\w`'\"]")
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Control, format (bidi overrides, zero-width), surrogate, private-use, unassigned and
line-separator characters: none is prose, and each can hide text from a reader."""

# Extension → the tree-sitter grammar's module, its language function, and the modules
# whose tags queries it takes (TypeScript's own extends JavaScript's, as its grammar does).
_JS = ("tree_sitter_javascript", "language", ("tree_sitter_javascript",))
_TS_TAGS = ("tree_sitter_javascript", "tree_sitter_typescript")
GRAMMARS = {
    ".js": _JS,
    ".mjs": _JS,
    ".cjs": _JS,
    ".jsx": _JS,
    ".ts": ("tree_sitter_typescript", "language_typescript", _TS_TAGS),
    ".tsx": ("tree_sitter_typescript", "language_tsx", _TS_TAGS),
    ".go": ("tree_sitter_go", "language", ("tree_sitter_go",)),
    ".rs": ("tree_sitter_rust", "language", ("tree_sitter_rust",)),
}
MAPPED_SUFFIXES = frozenset({".py", *GRAMMARS})
"""The files the map reads: Python, and the languages a grammar is installed for."""


@dataclass(frozen=True)
class Symbol:
    name: str
    """As it is referred to: `Session`, `Session.turn`, `MAX_LINES`."""
    kind: str
    """class, function, method, constant (or the grammar's own: interface, module, …)."""
    line: int
    summary: str = ""
    """What it says it is, in its own words: a Python docstring's first sentence, one
    line of at most SUMMARY_CHARS; "" when it has none."""

    def described(self) -> str:
        """`kind name`, and what it says it is after SAYS where it says anything."""
        return f"{self.kind} {self.name}" + (f"{SAYS}{self.summary}" if self.summary else "")


@dataclass
class FileSymbols:
    definitions: list[Symbol] = field(default_factory=list)
    references: dict[str, int] = field(default_factory=dict)
    """Name → how often the file uses it (not where it defines it)."""
    problem: str = ""
    """Why the file is not mapped (or only in part), in a few words; "" when it is."""

    def as_json(self) -> dict[str, Any]:
        return {
            "definitions": [[s.name, s.kind, s.line, s.summary] for s in self.definitions],
            "references": self.references,
            "problem": self.problem,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileSymbols:
        return cls(
            [
                Symbol(str(n), str(k), int(line), str(say))
                for n, k, line, say in data["definitions"]
            ],
            {str(name): int(count) for name, count in data["references"].items()},
            str(data["problem"]),
        )


def symbols_of(name: str, data: bytes) -> FileSymbols:
    """What the file `name` (its path, for its suffix) holds, from its bytes."""
    if len(data) > MAX_MAPPED_BYTES:
        return FileSymbols(problem=f"too large to map ({len(data) / 1024 / 1024:.1f} MB)")
    if b"\0" in data[:8192]:
        return FileSymbols(problem="binary")
    if _GENERATED.search(data[:2048]) or _minified(data):
        return FileSymbols(problem="generated")
    suffix = name[name.rfind(".") :] if "." in name else ""
    if suffix == ".py":
        return _python(data)
    if suffix in GRAMMARS:
        return _tree_sitter(suffix, data)
    return FileSymbols(problem="not a language the map reads")


def _minified(data: bytes) -> bool:
    lines = data.count(b"\n") + 1
    return len(data) > 4 * MINIFIED_LINE_CHARS and len(data) / lines > MINIFIED_LINE_CHARS


def _python(data: bytes) -> FileSymbols:
    try:
        tree = ast.parse(data)
    except SyntaxError as error:
        return FileSymbols(problem=f"does not parse (line {error.lineno}: {error.msg})")
    except ValueError as error:  # null bytes, or a source that cannot be decoded
        return FileSymbols(problem=f"does not parse ({error})")
    except (RecursionError, MemoryError):  # `x = (a` and 200,000 `.b`: Python's own limit
        return FileSymbols(problem="nested too deeply to parse")
    found = FileSymbols()
    for statement in tree.body:
        found.definitions.extend(_python_definitions(statement))
    for node in ast.walk(tree):
        used = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
        if isinstance(node, ast.alias):  # `from session import Session` uses Session
            used = node.name.rpartition(".")[2]
        if isinstance(used, str):
            found.references[used] = found.references.get(used, 0) + 1
    return found


def _python_definitions(node: ast.stmt) -> list[Symbol]:
    if isinstance(node, ast.If | ast.Try | ast.With | ast.TryStar):
        # a compatibility shim defines at the top level under `if`/`try` (both branches)
        inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
        inner += [s for handler in getattr(node, "handlers", []) for s in handler.body]
        return [symbol for statement in inner for symbol in _python_definitions(statement)]
    if isinstance(node, ast.ClassDef):
        methods = [
            Symbol(f"{node.name}.{item.name}", "method", item.lineno, _summary(item))
            for item in node.body
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        return [Symbol(node.name, "class", node.lineno, _summary(node)), *methods]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return [Symbol(node.name, "function", node.lineno, _summary(node))]
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign):
        targets = [node.target]
    return [
        Symbol(target.id, "constant", node.lineno)
        for target in targets
        if isinstance(target, ast.Name) and not target.id.startswith("__")
    ]


def _summary(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The docstring's first sentence on one line: from its first paragraph of prose (not
    a link, "Usage docs: https://…", nor markup, "!!! note" or "[Models](…)"), cut at
    its first full stop, its hidden characters and backticks made spaces (the map puts
    paths in backticks), at most SUMMARY_CHARS."""
    doc = ast.get_docstring(node) or ""
    paragraphs = [" ".join(_shown(p).split()) for p in doc.split("\n\n")]
    prose = next((p for p in paragraphs if _PROSE_START.match(p) and "://" not in p), "")
    first = _SENTENCE_END.split(prose, maxsplit=1)[0]
    return first if len(first) <= SUMMARY_CHARS else first[: SUMMARY_CHARS - 1] + "…"


def _shown(text: str) -> str:
    return "".join(" " if c == "`" or unicodedata.category(c) in _HIDDEN else c for c in text)


@functools.cache
def _query(suffix: str) -> tuple[Any, Any] | None:
    """The parser's language and the tags query for `suffix`; None when its grammar (or
    tree-sitter itself) is not installed."""
    module_name, function, tagged_by = GRAMMARS[suffix]
    try:
        import importlib

        import tree_sitter

        grammar = importlib.import_module(module_name)
        tags = "\n".join(
            (resources.files(name) / "queries" / "tags.scm").read_text(encoding="utf-8")
            for name in tagged_by
        )
    except (ImportError, OSError):
        return None
    language = tree_sitter.Language(getattr(grammar, function)())
    return language, tree_sitter.Query(language, tags)


def _tree_sitter(suffix: str, data: bytes) -> FileSymbols:
    found = _query(suffix)
    if found is None:
        return FileSymbols(problem=f"no grammar installed for {suffix} files")
    import tree_sitter

    language, query = found
    tree = tree_sitter.Parser(language).parse(data)
    if tree.root_node.has_error and len(data) > MAX_BROKEN_BYTES:
        return FileSymbols(problem="does not parse, and is too large to map in part")
    if (depth := _depth(tree.root_node)) > MAX_DEPTH:  # the tags query is quadratic in it
        return FileSymbols(problem=f"nested too deeply to map ({depth} levels)")
    symbols = FileSymbols(problem="parses only in part" if tree.root_node.has_error else "")
    seen: set[tuple[str, int]] = set()
    matches = tree_sitter.QueryCursor(query, match_limit=MATCH_LIMIT).matches(tree.root_node)
    for _pattern, captures in matches:
        names = captures.get("name") or []
        for capture, nodes in captures.items():
            role, _, kind = capture.partition(".")
            if not names or not nodes or role not in ("definition", "reference"):
                continue
            text = (names[0].text or b"").decode("utf-8", "replace")
            if not _IDENTIFIER.fullmatch(text):
                continue
            line = nodes[0].start_point[0] + 1
            if role == "definition" and (text, line) not in seen:  # a method is a function too
                seen.add((text, line))
                symbols.definitions.append(Symbol(text, kind, line))
            elif role == "reference":
                symbols.references[text] = symbols.references.get(text, 0) + 1
    symbols.definitions.sort(key=lambda s: s.line)
    return symbols


def _depth(root: Any) -> int:
    """How deep the syntax tree goes, walked once with a cursor (no recursion)."""
    cursor, depth, deepest = root.walk(), 0, 0
    while True:
        if cursor.goto_first_child():
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return deepest
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return deepest
            depth -= 1
