"""What counts as a test run: a command whose exit status is a test runner's, read from
the same bash parse the shell policy uses, never from words in the command's text.

`pytest`, `cd app && python -m pytest -q`, `PYTHONPATH=. timeout 60 pytest` are test
runs: the shell returns the runner's status. `echo pytest`, `grep pytest x`, `true &&
echo pytest`, `pytest || true`, `pytest | tail` and `! pytest` are not: what they return
says nothing about the tests. A run that exited 0 must also have run a test: a pytest
that collected nothing, or `Ran 0 tests`, is not a pass.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from tree_sitter import Node, Tree

from workers.tools.bash_reading import literal, parse

# Programs that run a project's tests by themselves.
RUNNERS = frozenset({"pytest", "py.test", "tox", "nox"})
# Programs whose first argument (after options) says whether they run the tests.
SUBCOMMANDS: dict[str, frozenset[str]] = {
    "make": frozenset({"test", "check"}),
    "go": frozenset({"test"}),
    "cargo": frozenset({"test"}),
    "npm": frozenset({"test", "t"}),
    "yarn": frozenset({"test"}),
    "pnpm": frozenset({"test"}),
}
# `npm run test`: a script named like the tests.
SCRIPT_RUNNERS = frozenset({"npm", "yarn", "pnpm"})
# Python modules that are test runners (`python -m pytest`).
PYTHON_MODULES = frozenset({"pytest", "unittest"})
# Commands that run another command and return its status.
WRAPPERS = frozenset({"env", "timeout", "nice", "time", "command", "exec"})
# `uv run pytest`, `poetry run pytest`: a tool's `run` that returns the command's status.
RUN_WRAPPERS = frozenset({"uv", "poetry", "pipenv", "hatch", "pdm", "rye"})
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")


# Commands that change what a later name runs, or what the shell returns: `source` and
# `.` run a file in the same shell, which may define a function named like the runner.
REDEFINING = frozenset(
    {"alias", "trap", "shopt", "enable", "hash", "eval", "unalias", "source", ".", "builtin"}
)
# Variables that change which program a name runs, or what a runner does.
STEERING_VARIABLES = frozenset({"PATH", "PYTEST_ADDOPTS", "BASH_ENV", "ENV", "PYTHONSTARTUP"})
# Options that make a runner report on itself, list, or plan instead of running tests.
_ABOUT_ITSELF = frozenset({"-h", "--help", "--version"})
NOT_RUNNING: dict[str, frozenset[str]] = {
    "pytest": _ABOUT_ITSELF
    | {"-V", "--co", "--collect-only", "--fixtures", "--fixtures-per-test", "--markers"}
    | {"--setup-plan", "--setup-only"},
    "unittest": _ABOUT_ITSELF,
    "make": _ABOUT_ITSELF | {"-n", "--dry-run", "--just-print", "--recon", "-q", "--question"},
    "cargo": _ABOUT_ITSELF | {"-V", "--no-run", "--list"},
    "go": _ABOUT_ITSELF | {"-list", "-n", "-help"},
    "npm": _ABOUT_ITSELF,
    "yarn": _ABOUT_ITSELF,
    "pnpm": _ABOUT_ITSELF,
    "tox": _ABOUT_ITSELF | {"-l", "--listenvs", "--notest", "-a", "--listenvs-all"},
    "nox": _ABOUT_ITSELF | {"-l", "--list", "--list-sessions"},
}
NOT_RUNNING["py.test"] = NOT_RUNNING["pytest"]


def is_test_run(command: str, extra: Iterable[str] = ()) -> bool:
    """Whether `command`'s exit status is a test runner's. `extra`: more runners, as the
    program's name (`./run-tests.sh`, `rake`) or its name and first word (`bin/rails test`)."""
    return _judged(command, frozenset(extra))


@functools.lru_cache(maxsize=4096)
def _judged(command: str, extra: frozenset[str]) -> bool:
    # The gate, the edit guard, reports and the task state all ask about the same
    # commands again and again: each is parsed once.
    words = status_command(command)
    return words is not None and _is_runner(words, extra)


def status_command(command: str) -> list[str] | None:
    """The words of the simple command whose exit status the whole command returns, or
    None when that is not one plain command (a negation, a loop, an expansion), or when
    anything in the command could change what that command runs or returns."""
    node = status_node(parse(command))
    if node is None:
        return None
    words: list[str] = []
    for child in node.named_children:
        if child.type == "variable_assignment":  # `PYTHONPATH=. pytest`
            continue
        if child.type == "command_name":
            child = child.named_children[0] if child.named_child_count == 1 else child
        if child.type in ("file_redirect", "herestring_redirect"):
            continue
        word = literal(child)
        if word is None:
            return None
        words.append(word)
    return words or None


def status_node(tree: Tree) -> Node | None:
    """The simple command whose exit status the whole command returns (status_command)."""
    if tree.root_node.has_error or _steers(tree.root_node):
        return None
    node = _last_statement(tree.root_node)
    while node is not None and node.type != "command":
        node = _status_of(node)
    return node


@dataclass(frozen=True)
class Invocation:
    """What a test command runs, past its wrappers."""

    runner: str
    """`pytest`, `unittest`, `make`, ... or a runner of `extra` as named."""
    programs: tuple[str, ...]
    """Every program on the way, as written (`timeout`, `.venv/bin/python`)."""
    interpreter_options: tuple[str, ...]
    """Python's own options before `-m` (`-X dev`)."""
    args: tuple[str, ...]
    """The runner's arguments."""


def invocation(words: list[str], extra: frozenset[str]) -> Invocation | None:
    """What a test command's words run, past wrappers (`timeout 60`, `uv run`, `python
    -m`); None when it is no runner, or `env` changes the environment (`env -i`, `NAME=x`)."""
    programs: list[str] = []
    while words:
        program, args = words[0], words[1:]
        programs.append(program)
        if program in extra or " ".join(words[:2]) in extra:
            return Invocation(program, tuple(programs), (), tuple(args))
        name = os.path.basename(program)
        if name in WRAPPERS:
            rest = _after_wrapper(name, args) or []
            if name == "env" and len(rest) < len(args):
                return None  # `env -i`, `env NAME=value`: a changed environment
            words = rest
        elif name in RUN_WRAPPERS and args[:1] == ["run"] and len(args) > 1:
            words = args[1:]
        else:
            runner = _runner(name, args)
            if runner is None:
                return None
            options: list[str] = []
            if _PYTHON.match(name):  # past `-m pytest`
                at = next(i for i, a in enumerate(args) if a.startswith("-m"))
                options, args = args[:at], args[at + (2 if args[at] == "-m" else 1) :]
            return Invocation(runner, tuple(programs), tuple(options), tuple(args))
    return None


def _steers(node: Node) -> bool:
    """A function definition, a background job, a command that redefines names, or an
    assignment to a variable that picks programs: each could make a runner's name or
    status mean something else."""
    if node.type == "function_definition" or (not node.is_named and node.type == "&"):
        return True
    if node.type == "variable_assignment":
        name = node.child_by_field_name("name")
        if name is not None and node_text(name) in STEERING_VARIABLES:
            return True
    if node.type == "command":
        name = node.child_by_field_name("name")
        if name is not None and node_text(name) in REDEFINING:
            return True
    return any(_steers(child) for child in node.children)


def node_text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


# A command as a task names it: in backticks, or after "with:" / "run:" to the line's end.
def ran_no_tests(output: str) -> bool:
    """A runner that exited 0 but says it ran nothing."""
    tail = output[-4000:]
    if re.search(
        r"\bno tests ran\b|\bRan 0 tests?\b|\bcollected 0 items\b|\[no tests to run\]", tail
    ):
        return True
    if "no test files" in tail and not re.search(r"^ok\s", tail, re.MULTILINE):
        return True  # go test
    return bool(
        re.search(r"\brunning 0 tests\b", tail) and not re.search(r"\brunning [1-9]", tail)
    )  # cargo test


def is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py") or "/tests/" in f"/{path}"


# Files that decide what a test run runs or how it counts: a sample never writes them.
TEST_SETUP = frozenset(
    {"conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "noxfile.py"}
    | {"Makefile", "package.json", ".coveragerc", "sitecustomize.py", "usercustomize.py"}
)


def steers_tests(path: str) -> bool:
    """A test, or a file that sets up or steers a test run."""
    parts = path.split("/")
    return (
        is_test_file(path)
        or parts[-1] in TEST_SETUP
        or parts[-1].endswith(".pth")
        or any(p in ("test", "tests") for p in parts[:-1])
        or any(mark in parts[-1] for mark in (".test.", ".spec."))
    )


# How runners name a test that failed: pytest's summary (`FAILED test_x.py::T::test_a -
# …`, `ERROR …`) and unittest's (`FAIL: test_a (test_x.T.test_a)`, `ERROR: …`).
_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+::\S+)", re.MULTILINE)
_UNITTEST_FAILED = re.compile(r"^(?:FAIL|ERROR): (\w+) \(([\w.]+)\)", re.MULTILINE)
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def failed_tests(output: str) -> frozenset[str] | None:
    """The tests a failed run names as failing (pytest's or unittest's words); None when
    it names none: a collection error, another runner, or output cut before its summary."""
    output = _COLOUR.sub("", output)
    named = {m.group(1) for m in _PYTEST_FAILED.finditer(output)}
    for m in _UNITTEST_FAILED.finditer(output):  # Python 3.11 names the test in both parts
        name, where = m.groups()
        named.add(where if where.endswith(f".{name}") else f"{where}.{name}")
    if any("_FailedTest" in name for name in named):
        return None  # unittest could not import a test module: it names no test that ran
    return frozenset(named) or None


def _last_statement(node: Node) -> Node | None:
    statements = [c for c in node.named_children if c.type not in ("comment", "heredoc_body")]
    return statements[-1] if statements else None


def _status_of(node: Node) -> Node | None:
    """The part of a compound statement whose exit status it returns."""
    if node.type in ("list", "pipeline"):
        # `a && b`, `a || b`: b's status when it runs; `a | b`: b's. A test that only
        # runs when something else failed (`x || pytest`) would pass unseen: not counted.
        operators = [c.type for c in node.children if not c.is_named]
        if "||" in operators:
            return None
        return node.named_children[-1] if node.named_children else None
    if node.type == "redirected_statement":
        body = node.child_by_field_name("body")
        return body
    if node.type in ("subshell", "compound_statement"):
        return _last_statement(node)
    return None  # negation, if, loops, functions: not a plain test run


def _is_runner(words: list[str], extra: frozenset[str]) -> bool:
    program, args = words[0], words[1:]
    if program in extra or " ".join(words[:2]) in extra:
        return True
    # A runner by its name on PATH, or in a virtual environment's bin: never one the
    # workspace could have planted under that name anywhere else.
    name = os.path.basename(program)
    if "/" in program and not program.endswith(f"bin/{name}"):
        return False
    if name in WRAPPERS:
        rest = _after_wrapper(name, args)
        return rest is not None and _is_runner(rest, extra)
    if name in RUN_WRAPPERS and args[:1] == ["run"] and len(args) > 1:
        return _is_runner(args[1:], extra)
    runner = _runner(name, args)
    return runner is not None and not NOT_RUNNING.get(runner, _ABOUT_ITSELF) & set(args)


def _runner(name: str, args: list[str]) -> str | None:
    """Which runner a command is (`pytest`, `unittest`, `make`, ...), or None."""
    if name in RUNNERS:
        return name
    if _PYTHON.match(name):
        module = _python_module(args)
        return module if module in PYTHON_MODULES else None
    first = next((a for a in args if not a.startswith("-")), None)
    if name in SUBCOMMANDS and first in SUBCOMMANDS[name]:
        return name
    if name in SCRIPT_RUNNERS and first == "run":
        script = next((a for a in args[args.index("run") + 1 :] if not a.startswith("-")), "")
        return name if script in ("test", "tests") else None
    return None


def _after_wrapper(name: str, args: list[str]) -> list[str] | None:
    """The command a wrapper runs; None when its options could change what it runs
    (`command -v`, `exec -a`, `env -S`)."""
    rest = list(args)
    if name == "env":
        while rest and ("=" in rest[0] or rest[0] in ("-i", "-", "--")):
            rest.pop(0)
        return rest if rest and not rest[0].startswith("-") else None
    if name == "timeout":
        while rest and rest[0].startswith("-") and rest[0] not in ("-k", "-s"):
            rest.pop(0)
        return rest[1:] or None  # past the duration
    if rest and rest[0].startswith("-"):
        return None
    return rest or None


def _python_module(args: list[str]) -> str | None:
    """The module of `python [options] -m MODULE`, or None."""
    rest = iter(args)
    for arg in rest:
        if arg == "-m":
            return next(rest, None)
        if arg.startswith("-m"):
            return arg[2:]
        if arg in ("-X", "-W"):  # an option with a value of its own
            next(rest, None)
        elif arg == "-c" or not arg.startswith("-"):
            return None  # code or a script runs, not a module
    return None
