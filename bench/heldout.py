"""The held-out suite: exercises made at bench time from code that is on this machine but
was not written here, so that what helps on them is not tuning to our own exercises.

How the tasks are chosen (fixed before the first run, and not to be tuned after it):

1. The pool: every top-level public function whose docstring has `>>>` examples, in the
   Python standard library's own modules (`Lib/*.py`) and in the distributions
   `make install` puts beside gaffer (its requirements, at any depth, without extras,
   and pip and setuptools, which every virtual environment has), tests excluded. Not
   the dev tools: the suite is the same whether or not `make dev` ran.
2. Kept when: its body is 3 to 30 lines; every name it uses is a parameter, a local, a
   builtin, a name its module imports from a pure standard-library module (PURE_MODULES),
   or a top-level function, class or constant of its module that needs only the same
   (these helpers, at most MAX_HELPER_LINES, go into the exercise unchanged); and its
   examples that use only those names (and pure imports) run without error and give a
   value that is not an iterator and is written back by its repr (so a test can hold it):
   those, with the same calls with their literals changed (numbers moved, strings and
   lists reversed or repeated), come to at least MIN_EXAMPLES recorded calls, at least
   one from the docstring.
3. Copies (the same function vendored twice) are kept once, by name and docstring.
4. The ten that rank first by sha256(SEED, name, docstring) are the suite: a function
   joining or leaving the pool moves at most one of them.

Each becomes an exercise in bench/agent_tasks.py's layout: `task.md`, the module with
the function's signature and docstring and a body that raises NotImplementedError, a
test file of recorded calls (each example's call and the value the original gave), and
the original under `solution/`.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import doctest
import functools
import hashlib
import io
import re
import signal
import sysconfig
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

SEED = 30
COUNT = 10
MIN_BODY, MAX_BODY = 3, 30
MIN_EXAMPLES = 4
"""Recorded calls a task's test holds at least, one of them from its docstring."""
MAX_CHECKS = 10
# One recorded call may take this long; a literal changed into a huge size is dropped.
CALL_SECONDS = 1.0
# A recorded value longer than this makes an unreadable test.
MAX_VALUE_CHARS = 400
# The module's own definitions a task may bring along: a small module, not a library.
MAX_HELPER_LINES = 80
# What a function to be a task may import: modules that compute and reach nothing else
# (no files, processes, network or clock), so running its examples here is harmless.
PURE_MODULES = {
    "abc",
    "array",
    "base64",
    "binascii",
    "bisect",
    "calendar",
    "cmath",
    "codecs",
    "collections",
    "colorsys",
    "copy",
    "dataclasses",
    "decimal",
    "difflib",
    "enum",
    "fnmatch",
    "fractions",
    "functools",
    "heapq",
    "html",
    "itertools",
    "json",
    "keyword",
    "math",
    "numbers",
    "operator",
    "posixpath",
    "re",
    "reprlib",
    "statistics",
    "string",
    "struct",
    "textwrap",
    "typing",
    "unicodedata",
}
# Examples that use these are not run: they reach outside the interpreter or only print.
UNSAFE_BUILTINS = {
    "open",
    "exec",
    "eval",
    "compile",
    "__import__",
    "input",
    "print",
    "breakpoint",
    "exit",
    "quit",
    "help",
}
TASK = (
    "Implement `{name}` in {module}.py so that the tests in test_{module}.py pass; its "
    "docstring says what it does. Do not modify the tests. Run the tests with: "
    "python3 -m pytest -q"
)
# The same task as others word it (task.<wording>.md beside task.md): the command in
# parentheses mid-sentence, as the held-out exercises that found issue 42 had it; and no
# command at all, the tests left to be found.
WORDINGS = {
    "parenthesized": (
        "Implement {name} in {module}.py so the tests in test_{module}.py pass (run them "
        "with: python3 -m pytest -q test_{module}.py). Do not modify the tests."
    ),
    "no-command": (
        "The function {name} in {module}.py is not written yet; its docstring says what it "
        "should do. Write it so that its tests pass, and leave the tests alone."
    ),
}


@dataclass(frozen=True)
class Check:
    """One recorded call: what earlier examples set up, the call, and the repr of the
    value the original gave."""

    setup: list[str]
    call: str
    expected: str
    names: frozenset[str] = frozenset()
    """The module's names it uses besides the function."""


@dataclass(frozen=True)
class Found:
    """A function fit to be a task, with what its exercise needs."""

    origin: str
    """Where it came from: `statistics.median`, `setuptools/…/more.py:chunked`."""
    name: str
    source: str
    imports: list[str]
    """The import lines its body and helpers need, as its module wrote them."""
    helpers: list[str]
    """The sources of the module's own definitions it needs, in the module's order."""
    checks: list[Check]


@functools.cache
def pool() -> list[Found]:
    """Every function that passes rule 2, once each, sorted by origin."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = [(p, p.stem) for p in sorted(stdlib.glob("*.py"))]
    files += [
        (Path(str(f.locate())), str(f))
        for name in sorted(_installed_with_gaffer())
        for f in metadata.distribution(name).files or []
        if f.suffix == ".py" and "test" not in f.name and "tests/" not in str(f)
    ]
    seen: set[str] = set()
    found = []
    for path, where in files:
        for candidate in _functions(path, where):
            doc = ast.get_docstring(ast.parse(candidate.source).body[0]) or ""  # type: ignore[arg-type]
            digest = hashlib.sha256(f"{candidate.name}\n{doc}".encode()).hexdigest()
            if digest not in seen:
                seen.add(digest)
                found.append(candidate)
    return sorted(found, key=lambda f: (f.origin, f.name))


def _installed_with_gaffer() -> set[str]:
    """The distributions `make install` brings: gaffer's requirements at any depth, as
    installed here, without extras; and pip and setuptools."""
    found = {"pip", "setuptools"}
    waiting = ["gaffer"]
    while waiting:
        try:
            required = metadata.requires(waiting.pop()) or []
        except metadata.PackageNotFoundError:
            continue
        for requirement in required:
            if "extra ==" in requirement:
                continue
            name = re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0].lower()
            if name not in found:
                found.add(name)
                waiting.append(name)
    return {n for n in found if _has(n)}


def _has(name: str) -> bool:
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def chosen(count: int = COUNT) -> list[Found]:
    """The suite: the `count` functions of the pool that rank first by a digest of the
    seed, their name and their docstring. A function joining or leaving the pool (another
    version of a package) moves at most one pick, where a seeded sample would reshuffle."""
    return sorted(pool(), key=_rank)[:count]


def _rank(found: Found) -> str:
    doc = ast.get_docstring(ast.parse(found.source).body[0]) or ""  # type: ignore[arg-type]
    return hashlib.sha256(f"{SEED}\n{found.name}\n{doc}".encode()).hexdigest()


def write_exercise(found: Found, root: Path) -> Path:
    """The exercise's folder under `root`, in bench/agent_tasks.py's layout."""
    module = f"{found.name}_task"
    folder = root / found.name
    (folder / "solution").mkdir(parents=True)
    head = "".join(f"{line}\n" for line in found.imports)
    head += "\n\n" if head else ""
    head += "".join(f"{helper}\n\n\n" for helper in found.helpers)
    (folder / "solution" / f"{module}.py").write_text(head + found.source + "\n")
    (folder / f"{module}.py").write_text(head + _stub(found.source) + "\n")
    names = sorted({found.name} | {n for c in found.checks for n in c.names})
    tests = [f"from {module} import {', '.join(names)}\n"]
    for index, check in enumerate(found.checks, 1):
        body = "".join(f"    {line}\n" for code in check.setup for line in code.splitlines())
        body += f"    assert {check.call} == {check.expected}\n"
        tests.append(f"\n\ndef test_{found.name}_{index}():\n{body}")
    (folder / f"test_{module}.py").write_text("".join(tests))
    (folder / "task.md").write_text(TASK.format(name=found.name, module=module) + "\n")
    for wording, text in WORDINGS.items():
        (folder / f"task.{wording}.md").write_text(text.format(name=found.name, module=module))
    return folder


def _functions(path: Path, where: str) -> Iterator[Found]:
    try:
        text = path.read_text()
        tree = ast.parse(text)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return
    imports = _stdlib_imports(tree)
    defined = _definitions(tree)
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
            continue
        doc = ast.get_docstring(node) or ""
        if ">>>" not in doc or node.decorator_list or len(node.body) < 2:
            continue
        if not MIN_BODY <= (node.end_lineno or 0) - node.body[1].lineno + 1 <= MAX_BODY:
            continue
        helpers = _helpers(node, defined, imports)
        if helpers is None:
            continue
        needed = set().union(*(_free_names(n) for n in [node, *helpers])) - set(dir(builtins))
        lines = sorted({imports[name] for name in needed if name in imports})
        sources = [ast.get_source_segment(text, h) or "" for h in helpers]
        if sum(s.count("\n") + 1 for s in sources) > MAX_HELPER_LINES:
            continue
        source = textwrap.dedent(ast.get_source_segment(text, node) or "")
        module_names = {name for h in helpers for name in _bound_names(h)}
        checks = _record(node.name, source, lines, sources, module_names, doc)
        if len(checks) >= MIN_EXAMPLES:
            yield Found(f"{where}:{node.name}", node.name, source, lines, sources, checks)


def _definitions(tree: ast.Module) -> dict[str, ast.stmt]:
    """The module's top-level functions, classes and simple constants, by name."""
    found: dict[str, ast.stmt] = {}
    for node in tree.body:
        for name in _bound_names(node):
            found[name] = node
    return found


def _bound_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    return []


def _helpers(
    function: ast.FunctionDef, defined: dict[str, ast.stmt], imports: dict[str, str]
) -> list[ast.stmt] | None:
    """The module's definitions `function` needs, at any depth, in the module's order;
    None when it needs a name that is neither those, a pure import nor a builtin."""
    needed: list[ast.stmt] = []
    waiting = [function]
    while waiting:
        if not _harmless(current := waiting.pop()):
            return None
        for name in sorted(_free_names(current) - set(dir(builtins))):
            if name in imports or name == function.name:
                continue
            helper = defined.get(name)
            if helper is None or (isinstance(helper, ast.ClassDef) and helper.decorator_list):
                return None
            if helper not in needed:
                needed.append(helper)
                waiting.append(helper)  # type: ignore[arg-type]
    order = {id(node): index for index, node in enumerate(defined.values())}
    return sorted(needed, key=lambda node: order.get(id(node), 0))


def _harmless(node: ast.AST) -> bool:
    """Code that calls none of UNSAFE_BUILTINS and reaches no dunder attribute (the
    way from a harmless object to everything else): what is run here to record values."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and inner.id in UNSAFE_BUILTINS:
            return False
        if isinstance(inner, ast.Attribute) and inner.attr.startswith("__"):
            return False
    return True


def _stdlib_imports(tree: ast.Module) -> dict[str, str]:
    """Each name the module's top-level imports bind from the standard library, with the
    import line that binds it alone."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_stdlib(alias.name):
                    bound = alias.asname or alias.name.split(".")[0]
                    names[bound] = f"import {alias.name}" + (
                        f" as {alias.asname}" if alias.asname else ""
                    )
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _is_stdlib(node.module):
            for alias in node.names:
                bound = alias.asname or alias.name
                names[bound] = f"from {node.module} import {alias.name}" + (
                    f" as {alias.asname}" if alias.asname else ""
                )
    return names


def _is_stdlib(module: str | None) -> bool:
    """A module of the standard library that computes and touches nothing outside."""
    return module is not None and module.split(".")[0] in PURE_MODULES


def _free_names(function: ast.stmt) -> set[str]:
    """Names the definition reads that it does not bind itself."""
    bound = {a.arg for a in ast.walk(function) if isinstance(a, ast.arg)}
    loaded = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.Lambda | ast.ClassDef) and node is not function:
            if not isinstance(node, ast.Lambda):
                bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loaded - bound


def _record(
    name: str,
    source: str,
    imports: list[str],
    helpers: list[str],
    module_names: set[str],
    doc: str,
) -> list[Check]:
    """The examples of `doc` that use only the function, its helpers, builtins, pure
    imports and what earlier examples bound, each with the repr of what the original
    gives; then the same calls with their literals changed (recorded calls the docstring
    does not show). Only values a repr writes back exactly."""
    namespace: dict[str, Any] = {}
    module = "\n".join([*imports, *(textwrap.dedent(h) for h in helpers), source])
    try:
        exec(compile(module, name, "exec"), namespace)
    except Exception:
        return []
    allowed = (set(dir(builtins)) - UNSAFE_BUILTINS) | {name} | module_names
    setup: list[str] = []
    shown: list[Check] = []
    recorded: list[Check] = []
    try:
        examples = doctest.DocTestParser().get_examples(doc)
    except ValueError:  # a docstring doctest cannot read
        return []
    for example in examples:
        code = example.source.strip()
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        if not used <= allowed or not _pure_imports(tree) or not _harmless(tree):
            continue
        if not (len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr)):
            try:  # a statement an example sets up for the next ones
                _run(lambda code=code: exec(code, namespace))  # type: ignore[misc]
            except Exception:
                continue
            setup.append(code)
            allowed |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            allowed |= {
                a.asname or a.name
                for n in ast.walk(tree)
                if isinstance(n, ast.Import | ast.ImportFrom)
                for a in n.names
            }
            continue
        if name not in used:
            continue
        names = frozenset(used & module_names)
        for index, variant in enumerate([code, *_variants(tree.body[0].value)]):
            if (written := _value(variant, namespace)) is not None:
                (recorded if index else shown).append(Check(list(setup), variant, written, names))
    return shown + recorded[: max(0, MAX_CHECKS - len(shown))] if shown else []


def _value(call: str, namespace: dict[str, Any]) -> str | None:
    """The repr of what `call` gives, when it runs in time and its repr writes it back."""
    try:
        value = _run(lambda: eval(call, dict(namespace)))
        written = repr(value)
        if isinstance(value, Iterator) or eval(written, {}) != value:
            return None
    except Exception:
        return None
    return written if len(written) <= MAX_VALUE_CHARS else None


def _run(thunk: Callable[[], Any]) -> Any:
    """`thunk()` with its prints swallowed, stopped after CALL_SECONDS."""

    def late(*_args: object) -> None:
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, CALL_SECONDS)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return thunk()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _pure_imports(tree: ast.AST) -> bool:
    return all(
        _is_stdlib(a.name if isinstance(n, ast.Import) else n.module)
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    )


class _Changed(ast.NodeTransformer):
    """Every literal of a call changed one way: numbers moved by `step`, strings and
    sequences reversed or repeated."""

    def __init__(self, step: int) -> None:
        self.step = step

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        value = node.value
        if isinstance(value, bool) or value is None:
            return node
        if isinstance(value, int) and abs(value) < 1000:
            return ast.copy_location(ast.Constant(value + self.step), node)
        if isinstance(value, str) and value:
            changed = value[::-1] if self.step == 1 else value + value[:1]
            return ast.copy_location(ast.Constant(changed), node)
        return node

    def visit_List(self, node: ast.List) -> ast.AST:
        self.generic_visit(node)
        if self.step == 1:
            node.elts = node.elts[::-1]
        return node


def _variants(call: ast.expr) -> list[str]:
    """The call with its literals changed, each way once; none the same as the call."""
    original = ast.unparse(call)
    found = []
    for step in (1, 2):
        changed = ast.unparse(_Changed(step).visit(copy.deepcopy(call)))
        if changed != original and changed not in found:
            found.append(changed)
    return found


def _stub(source: str) -> str:
    """The function with its docstring and a body that raises NotImplementedError."""
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    lines = source.splitlines()
    keep = lines[: function.body[0].end_lineno]  # the signature and the docstring
    indent = " " * function.body[0].col_offset
    return "\n".join([*keep, f"{indent}raise NotImplementedError"])


def main() -> None:
    """Print the pool's size and the suite as drawn (no model is run)."""
    every = pool()
    print(f"pool: {len(every)} functions")
    for found in chosen():
        print(f"  {found.origin}  ({len(found.checks)} recorded calls)")


if __name__ == "__main__":
    main()
