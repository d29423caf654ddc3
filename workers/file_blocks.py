"""Writes a model makes as fenced code blocks in its reply, for models that garble code
inside a tool call's JSON.

A small model asked for a file's new content writes good code in a markdown block and
poor code in an escaped JSON string (on the bench exercises: the canonical solution
against `return str(n)`). So an agent with file blocks on is not offered write_file and
edit_file; it replies with the file's path on a line of its own and the content in a
fenced block under it, and each block becomes a write_file call that runs like any other
(in the agent's sandbox, read-before-edit, logged, verified).

A Python block that holds only some of a file's functions or classes replaces those and
keeps the rest: small models give the function they changed, not the whole file. A
block with no path line is for the one Python file the agent has read that defines what
the block defines.
"""

from __future__ import annotations

import ast
import json
import re

from workers.editing import EditGuard
from workers.model import ToolCall
from workers.tools.base import ToolError
from workers.tools.workspace import read_confined
from workers.verification import named_paths

WRITE_NOW = (
    "To change a file, reply with its path on a line of its own and its corrected code in "
    "a fenced block under it."
)
WRITE_BLOCKS = "Change files with fenced blocks, as shown under Writing files below."
HOW_TO_WRITE = (
    "To write a file, reply with its path on a line of its own, then its complete new "
    "content in one fenced code block. For a Python file you may give only the functions "
    "and classes you change (with any imports they need); the rest of the file stays. "
    # An example with no function in it: a small model calls a function it was shown.
    'Example:\n\nsettings.py\n```python\nGREETING = "Hello"\n```'
)
# A block: an optional info string (a language, maybe a path), its body, a closing fence.
# A block the reply was cut in the middle of never closes, so it is never written.
_BLOCK = re.compile(r"^```[ \t]*(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
MAX_BLOCK_FILE_BYTES = 1024 * 1024


def calls_from_blocks(text: str, guard: EditGuard, call_id: str) -> list[ToolCall]:
    """A write_file call for each block of `text` that is a file's new content and would
    change it; blocks that are examples, commands or output are left as prose."""
    return read_blocks(text, guard, call_id)[0]


def read_blocks(text: str, guard: EditGuard, call_id: str) -> tuple[list[ToolCall], list[str]]:
    """The write_file calls of `text` (as `calls_from_blocks`), and the files it has
    blocks for that already hold exactly what the block would make them."""
    calls: list[ToolCall] = []
    unchanged: list[str] = []
    written: set[str] = set()
    start = 0
    for match in _BLOCK.finditer(text):
        label = _label(text[start : match.start()], match.group("info"), guard.container_root)
        start = match.end()
        body = match.group("body")
        path = label or _defining_file(body, guard)
        if path is None or path in written:
            continue
        old = _current(guard, path)
        new = body if old is None or not path.endswith(".py") else _merged(old, body)
        if new is not None and new == old and path not in unchanged:
            unchanged.append(path)
        if new is None or new == old:
            continue
        written.add(path)
        arguments = json.dumps({"path": path, "content": new})
        calls.append(
            ToolCall(id=f"{call_id}-{len(calls) + 1}", name="write_file", arguments=arguments)
        )
    return calls, unchanged


def _label(before: str, info: str, container_root: str | None) -> str | None:
    """The path a block is for: named in its info string (```python calc.py), or alone on
    the last line before it (`calc.py`, **calc.py**, calc.py:, # calc.py, File: calc.py)."""
    in_info = named_paths(info.replace(":", " "), container_root)
    if in_info:
        return in_info[-1]
    lines = [line for line in before.splitlines() if line.strip()]
    if not lines:
        return None
    last = lines[-1].strip().strip("*`#:'\" ").removeprefix("File:").strip("*`:'\" ")
    paths = named_paths(last, container_root)
    alone = last.removeprefix(f"{container_root}/") if container_root else last
    return paths[0] if len(paths) == 1 and paths[0] == alone else None


def _defining_file(body: str, guard: EditGuard) -> str | None:
    """The one Python file the agent has read that defines a name the block defines."""
    defined = _top_level_names(body)
    if not defined:
        return None
    found = []
    for path in guard.seen:
        name = path.rsplit("/", 1)[-1]
        if not path.endswith(".py") or name.startswith("test_") or name.endswith("_test.py"):
            continue
        old = _current(guard, path)
        if old is not None and defined & _top_level_names(old):
            found.append(path)
    return found[0] if len(found) == 1 else None


def _current(guard: EditGuard, path: str) -> str | None:
    try:
        data = read_confined(guard.workspace, path, MAX_BLOCK_FILE_BYTES)
    except ToolError:
        return None
    if data is None or len(data) > MAX_BLOCK_FILE_BYTES:
        return None
    return data.decode("utf-8", errors="replace")


def _top_level_names(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    return {name for node in tree.body if (name := _name_of(node))}


def _name_of(node: ast.stmt) -> str | None:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def _merged(old: str, block: str) -> str | None:
    """The file with the block's definitions in place of the old ones of the same names,
    new ones after them and new imports after the old imports. The whole block when it
    defines everything the file defines (or the file does not parse); None when the
    block is not Python."""
    try:
        new_tree = ast.parse(block)
    except (SyntaxError, ValueError):
        return None
    try:
        old_tree = ast.parse(old)
    except (SyntaxError, ValueError):
        return _ended(block)
    old_names = {n for node in old_tree.body if (n := _name_of(node))}
    new_names = {n for node in new_tree.body if (n := _name_of(node))}
    if old_names <= new_names:
        return _ended(block)
    old_lines, block_lines = old.splitlines(), block.splitlines()
    spans = {n: _span(node) for node in old_tree.body if (n := _name_of(node))}
    imports_end = max(
        (_span(node)[1] for node in old_tree.body if isinstance(node, ast.Import | ast.ImportFrom)),
        default=_docstring_end(old_tree),
    )
    replaced: dict[int, list[str]] = {}  # old start line → the lines that take its span
    dropped: set[int] = set()
    added_imports: list[str] = []
    appended: list[str] = []
    for node in new_tree.body:
        first, last = _span(node)
        text = block_lines[first - 1 : last]
        name = _name_of(node)
        if isinstance(node, ast.Import | ast.ImportFrom):
            if not all(line.strip() in {o.strip() for o in old_lines} for line in text):
                added_imports += text
        elif name in spans:
            old_first, old_last = spans[name]
            replaced[old_first] = text
            dropped.update(range(old_first + 1, old_last + 1))
        elif name is not None:
            appended += ["", "", *text]
    if not replaced and not appended and not added_imports:
        return None  # a snippet of statements, not definitions: not a file's content
    out: list[str] = []
    for number, line in enumerate(old_lines, start=1):
        if number in dropped:
            continue
        out += replaced.get(number, [line])
        if number == imports_end:
            out += added_imports
    if imports_end == 0:
        out = added_imports + ([""] if added_imports and out else []) + out
    return _ended("\n".join(out + appended))


def _span(node: ast.stmt) -> tuple[int, int]:
    """A statement's lines, decorators included."""
    decorators = getattr(node, "decorator_list", [])
    first = min([node.lineno, *(d.lineno for d in decorators)])
    return first, node.end_lineno or node.lineno


def _docstring_end(tree: ast.Module) -> int:
    first = tree.body[0] if tree.body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return first.end_lineno or first.lineno
    return 0


def _ended(text: str) -> str:
    return text.rstrip("\n") + "\n"
