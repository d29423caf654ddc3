"""A Python block merged into a Python file by definition: what a small model means when
it shows only the function it changed.

A block never deletes code it does not show. Each function, class or named constant in
the block takes the place of the one of the same name in the file; a method given alone
(`def push(self, item)`) takes the place of that method in the one class that has it; a
class given with some of its methods changes those and keeps the others. New imports go
after the file's imports, new constants before its first definition, new functions and
classes after its last one. Other top-level statements of the block (an example call,
a `print`) are not the file's content and are left out. The result must parse, or
nothing is written.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from workers import python_source

_DEFINITION = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
_OLD_DEFINITION = re.compile(r"^(?:async\s+def|def|class)\s+(\w+)", re.MULTILINE)


class MergeProblem(Exception):
    """Why a block cannot be merged, in words for the model."""


def merge(old: str, block: str) -> str:
    """`old` with the block's definitions in place; MergeProblem when it cannot be."""
    newline = "\r\n" if "\r\n" in old else "\n"
    old, block = _lf(old), _lf(block)
    try:
        new_tree = python_source.parse(block)
    except SyntaxError as error:
        message = f"the block is not valid Python (line {error.lineno}: {error.msg})"
        raise MergeProblem(message) from None
    if not old.strip():
        return _ended(block, newline)
    try:
        old_tree = python_source.parse(old)
    except SyntaxError:
        # A broken file is replaced only by a block that has everything it defined.
        if set(_OLD_DEFINITION.findall(old)) <= _names(new_tree.body):
            return _ended(block, newline)
        raise MergeProblem(
            "the file does not parse, so only a block with all of its functions and "
            "classes can replace it"
        ) from None
    merged = _Merge(old.split("\n"), old_tree, block.split("\n"), new_tree).run()
    try:
        python_source.parse(merged)
    except SyntaxError as error:
        raise MergeProblem(
            f"merged into the file it would not parse (line {error.lineno}: {error.msg}); "
            "give whole functions or classes"
        ) from None
    return _ended(merged, newline)


def defines(source: str) -> set[str]:
    """The functions and classes a module defines, methods included; empty when it does
    not parse."""
    try:
        tree = python_source.parse(_lf(source))
    except (SyntaxError, ValueError):
        return set()
    names = _names(tree.body, constants=False)
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names |= _names(node.body, constants=False)
    return names


def definitions(source: str) -> dict[str, str]:
    """Each top-level function and class of a module by name, as its source lines
    (decorators included); empty when it does not parse."""
    if (parsed := _parsed(source)) is None:
        return {}
    tree, lines = parsed
    return {
        node.name: "\n".join(_source(lines, node)) + "\n"
        for node in tree.body
        if isinstance(node, _DEFINITION)
    }


def with_what_it_uses(source: str, name: str) -> str | None:
    """A module's top-level function or class `name` as a block to merge into another
    file: with the module's imports, and the top-level functions, classes and constants it
    uses (and those use); None when it has no such definition or does not parse."""
    if (parsed := _parsed(source)) is None:
        return None
    tree, lines = parsed
    named = {n: node for node in tree.body if (n := _name_of(node))}
    if not isinstance(named.get(name), _DEFINITION):
        return None
    wanted, todo = {name}, [named[name]]
    while todo:
        for node in ast.walk(todo.pop()):
            if isinstance(node, ast.Name) and node.id in named and node.id not in wanted:
                wanted.add(node.id)
                todo.append(named[node.id])
    parts = [
        "\n".join(_source(lines, node))
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom) or _name_of(node) in wanted
    ]
    return "\n\n".join(parts) + "\n"


def _parsed(source: str) -> tuple[ast.Module, list[str]] | None:
    """A module's tree and its lines as ast counts them (a form feed is not a line
    break); None when it does not parse."""
    source = _lf(source)
    try:
        return python_source.parse(source), source.split("\n")
    except (SyntaxError, ValueError):
        return None


@dataclass
class _Merge:
    old: list[str]
    old_tree: ast.Module
    block: list[str]
    new_tree: ast.Module
    replaced: dict[int, tuple[int, list[str]]] = field(default_factory=dict)
    """Old start line → (old end line, the lines in its place)."""
    inserted: dict[int, list[str]] = field(default_factory=dict)
    """Old line → lines to put after it (0: before the first line)."""

    def run(self) -> str:
        top = _spans(self.old_tree.body)
        classes = {n.name: n for n in self.old_tree.body if isinstance(n, ast.ClassDef)}
        used = _loaded_names(self.new_tree)
        for node in self.new_tree.body:
            name = _name_of(node)
            text = _source(self.block, node)
            if isinstance(node, ast.Import | ast.ImportFrom):
                self._import(node, text)
            elif isinstance(node, ast.ClassDef) and name in classes:
                self._class(classes[name], node)
            elif name is not None and name in top:
                self._replace(top[name], text)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (
                owner := self._owner(node, classes)
            ):
                self._method(owner, node, text)
            elif isinstance(node, _DEFINITION):
                self._insert(self._after_definitions(), ["", "", *text])
            elif name is not None and name in used:  # a constant the block's code uses
                self._insert(self._after_imports(), ["", *text])
        return "\n".join(self._applied())

    def _import(self, node: ast.Import | ast.ImportFrom, text: list[str]) -> None:
        have = {line.strip() for line in self.old}
        if all(line.strip() in have for line in text):
            return
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        self._insert(self._header_end() if future else self._after_imports(), text)

    def _class(self, old: ast.ClassDef, new: ast.ClassDef) -> None:
        members = _spans(old.body)
        if not members or not _names(new.body) or _names(members) <= _names(new.body):
            self._replace(_span(old), _source(self.block, new))
            return
        indent = old.body[0].col_offset - new.body[0].col_offset
        for member in new.body:
            name = _name_of(member)
            text = _indented(_source(self.block, member), indent)
            if name in members:
                self._replace(members[name], text)
            elif isinstance(member, _DEFINITION):
                self._insert(_span(old)[1], ["", *text])

    def _owner(self, node: ast.stmt, classes: dict[str, ast.ClassDef]) -> ast.ClassDef | None:
        """The one class with a method of this name, for a method given on its own."""
        args = getattr(node, "args", None)
        first = args.args[0].arg if args is not None and args.args else ""
        if first not in ("self", "cls"):
            return None
        owners = [c for c in classes.values() if _name_of(node) in _names(c.body)]
        return owners[0] if len(owners) == 1 else None

    def _method(self, owner: ast.ClassDef, node: ast.stmt, text: list[str]) -> None:
        member = _spans(owner.body)[str(_name_of(node))]
        self._replace(member, _indented(text, owner.body[0].col_offset - node.col_offset))

    def _replace(self, span: tuple[int, int], text: list[str]) -> None:
        self.replaced[span[0]] = (span[1], text)

    def _insert(self, after: int, text: list[str]) -> None:
        self.inserted.setdefault(after, []).extend(text)

    def _header_end(self) -> int:
        """The line after which nothing but code follows: a shebang, encoding comments and
        the module docstring come first."""
        body = self.old_tree.body
        if body and _is_docstring(body[0]):
            return _span(body[0])[1]
        end = 0
        while end < len(self.old) and self.old[end].startswith("#"):
            end += 1
        return end

    def _after_imports(self) -> int:
        ends = [
            _span(n)[1] for n in self.old_tree.body if isinstance(n, ast.Import | ast.ImportFrom)
        ]
        return max(ends, default=self._header_end())

    def _after_definitions(self) -> int:
        ends = [_span(n)[1] for n in self.old_tree.body if isinstance(n, _DEFINITION)]
        return max(ends, default=len(self.old))

    def _applied(self) -> list[str]:
        out = list(self.inserted.get(0, []))
        skip_to = 0
        for number, line in enumerate(self.old, start=1):
            if number <= skip_to:
                pass
            elif number in self.replaced:
                skip_to, text = self.replaced[number]
                out += text
            else:
                out.append(line)
            if number >= skip_to:
                out += self.inserted.get(number, [])
        return out


def _source(lines: list[str], node: ast.stmt) -> list[str]:
    """A statement's lines, decorators included."""
    first, last = _span(node)
    return lines[first - 1 : last]


def _spans(body: list[ast.stmt]) -> dict[str, tuple[int, int]]:
    return {name: _span(node) for node in body if (name := _name_of(node))}


def _span(node: ast.stmt) -> tuple[int, int]:
    """A statement's lines, decorators included."""
    decorators = getattr(node, "decorator_list", [])
    first = min([node.lineno, *(d.lineno for d in decorators)])
    return first, node.end_lineno or node.lineno


def _names(body: list[ast.stmt] | dict[str, tuple[int, int]], constants: bool = True) -> set[str]:
    if isinstance(body, dict):
        return set(body)
    return {
        name
        for node in body
        if (name := _name_of(node)) and (constants or isinstance(node, _DEFINITION))
    }


def _name_of(node: ast.stmt) -> str | None:
    if isinstance(node, _DEFINITION):
        return node.name
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def _loaded_names(tree: ast.Module) -> set[str]:
    """Names the block's functions and classes read."""
    return {
        n.id
        for node in tree.body
        if isinstance(node, _DEFINITION)
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _indented(lines: list[str], by: int) -> list[str]:
    if by > 0:
        return [" " * by + line if line.strip() else line for line in lines]
    if by < 0:
        return [line[-by:] if line[:-by].strip() == "" else line for line in lines]
    return lines


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _ended(text: str, newline: str) -> str:
    return (text.rstrip("\n") + "\n").replace("\n", newline)
