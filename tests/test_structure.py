"""The shape of the code: no import circle, `workers/` never importing `supervisor/`, and
no source file so long that a newcomer cannot hold it in their head."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("supervisor", "workers")
MAX_LINES = 400
"""About a screenful of screens: past this a file holds more than one idea."""


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports(path: Path, known: dict[str, Path], *, at_import_time: bool) -> set[str]:
    """The project's modules `path` imports: all of them, or only those at module level
    (those under `if TYPE_CHECKING:` included: a module that needs another's types
    depends on it; an import inside a function is a deliberate late one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    statements: list[ast.stmt | ast.expr | ast.AST]
    statements = list(tree.body) if at_import_time else list(ast.walk(tree))
    names: set[str] = set()
    while statements:
        node = statements.pop()
        if at_import_time and isinstance(node, ast.If | ast.Try | ast.With):
            for field in ("body", "orelse", "finalbody", "handlers"):
                statements.extend(getattr(node, field, []))
        if isinstance(node, ast.ExceptHandler):
            statements.extend(node.body)
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
            names.add(node.module)
    found = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        # importing a.b.c runs a/__init__ and a/b/__init__ first
        while name:
            found.add(name)
            name = name.rpartition(".")[0]
    return found & known.keys()


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles (strongly connected groups of two or more), by Tarjan."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_through_others() -> None:
    known = modules()
    graph = {
        name: {
            other
            for other in imports(path, known, at_import_time=True)
            # a package's __init__ imported by its own modules is not a circle of code
            if other != name and not name.startswith(other + ".")
        }
        for name, path in known.items()
    }
    assert circles(graph) == []


def test_workers_never_import_supervisor() -> None:
    known = modules()
    reaching = {
        name: sorted(other for other in imports(path, known, at_import_time=False))
        for name, path in known.items()
        if name.startswith("workers")
    }
    wrong = {
        name: [o for o in others if o.startswith("supervisor")] for name, others in reaching.items()
    }
    assert {name: others for name, others in wrong.items() if others} == {}


def test_no_source_file_is_over_the_limit() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in modules().values()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


# The files allowed a function past ruff's complexity limit (pyproject.toml), as on the
# day the limit came: a file may leave this list, none may join it.
COMPLEX_TODAY = {
    "supervisor/resume.py",
    "supervisor/run_setup.py",
    "supervisor/scheduler.py",
    "tests/fake_openai.py",
    "workers/changes/merging.py",
    "workers/model/replies.py",
    "workers/sandbox/guard.py",
    "workers/tools/files.py",
    "workers/tools/shell_policy.py",
}


def test_complexity_exceptions_only_shrink() -> None:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    lint = config["tool"]["ruff"]["lint"]
    assert "C901" in lint["select"] and lint["mccabe"]["max-complexity"] <= 12
    excepted = {path for path, rules in lint["per-file-ignores"].items() if "C901" in rules}
    assert excepted <= COMPLEX_TODAY, f"new exceptions: {sorted(excepted - COMPLEX_TODAY)}"


# The loop and what it stands on: none of them may know an aid (workers/hooks.py).
KNOWS_NO_AID = (
    "workers.loop",
    "workers.calls",
    "workers.agent_view",
    "workers.hooks",
    "workers.guards.repetition",
    "workers.guards.editing",
    "workers.guards.verification",
    "workers.guards.test_runs",
    "workers.guards.context",
)
MAX_LOOP_LINES = 50
MAX_LOOP_FLAGS = 2


def test_the_loop_and_its_guards_import_no_aid() -> None:
    known = modules()
    assert "def run_agent(" in known["workers.loop"].read_text(encoding="utf-8")
    reaching: dict[str, set[str]] = {}
    for name in KNOWS_NO_AID:
        found, todo = set(), [name]
        while todo:  # every module it reaches, through any import, at any time
            for other in imports(known[todo.pop()], known, at_import_time=False) - found:
                found.add(other)
                todo.append(other)
        reaching[name] = {o for o in found if o.startswith("workers.aids")}
    assert {name: aids for name, aids in reaching.items() if aids} == {}


def test_the_loop_fits_a_screen_with_two_flags() -> None:
    tree = ast.parse((ROOT / "workers" / "loop.py").read_text(encoding="utf-8"))
    [loop] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_loop"]
    assert loop.end_lineno is not None and loop.end_lineno - loop.lineno + 1 <= MAX_LOOP_LINES
    flags: set[str] = set()  # locals given True or False somewhere: the loop's flags
    for node in ast.walk(loop):
        for target in node.targets if isinstance(node, ast.Assign) else []:
            pairs = [(target, node.value)]
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                pairs = list(zip(target.elts, node.value.elts, strict=False))
            flags |= {
                name.id
                for name, value in pairs
                if isinstance(name, ast.Name)
                and isinstance(value, ast.Constant)
                and isinstance(value.value, bool)
            }
    assert len(flags) <= MAX_LOOP_FLAGS, flags


# Calls that start a process. workers/host_programs.py is the one place they may be made:
# it runs each program isolated from the workspace (its docstring says how).
_STARTS = {
    "subprocess": {"run", "Popen", "call", "check_call", "check_output", "getoutput"}
    | {"getstatusoutput"},
    "os": {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
    "pty": {"spawn", "fork"},
    "webbrowser": {"open", "open_new", "open_new_tab", "get"},
}
HOST_PROGRAMS = "workers.host_programs"


def process_starts(path: Path) -> list[str]:
    """Where `path` starts a process itself: calls `module.call(...)` and imports `from
    module import call` of the calls above, and any `os.exec*` / `os.spawn*`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        called = node.func if isinstance(node, ast.Call) else None
        if isinstance(called, ast.Attribute) and isinstance(called.value, ast.Name):
            module, name = called.value.id, called.attr
        elif isinstance(node, ast.ImportFrom) and node.module in _STARTS:
            module, name = node.module, ",".join(alias.name for alias in node.names)
        else:
            continue
        calls = _STARTS.get(module, set())
        names = set(name.split(","))
        if names & calls or (module == "os" and name.startswith(("exec", "spawn"))):
            found.append(f"{path.name}:{node.lineno} {module}.{name}")
    return sorted(found, key=lambda where: int(where.split(":")[1].split()[0]))


def test_only_host_programs_starts_a_process() -> None:
    starts = [
        where
        for name, path in modules().items()
        if name != HOST_PROGRAMS
        for where in process_starts(path)
    ]
    assert starts == []


def test_the_process_finder_finds_each_way(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import os, subprocess\nfrom subprocess import Popen\n"
        "subprocess.run(['x'])\nos.execvp('x', ['x'])\nos.system('x')\n"
    )
    assert process_starts(planted) == [
        "planted.py:2 subprocess.Popen",
        "planted.py:3 subprocess.run",
        "planted.py:4 os.execvp",
        "planted.py:5 os.system",
    ]
