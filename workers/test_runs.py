"""What counts as a test run: a command whose exit status is a test runner's, read from
the same bash parse the shell policy uses, never from words in the command's text.

`pytest`, `cd app && python -m pytest -q`, `PYTHONPATH=. timeout 60 pytest` are test
runs: the shell returns the runner's status. `echo pytest`, `grep pytest x`, `true &&
echo pytest`, `pytest || true`, `pytest | tail` and `! pytest` are not: what they return
says nothing about the tests. A run that exited 0 must also have run a test: a pytest
that collected nothing, or `Ran 0 tests`, is not a pass.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from tree_sitter import Node

from workers.tools.shell_policy import literal, parse

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


def is_test_run(command: str, extra: Iterable[str] = ()) -> bool:
    """Whether `command`'s exit status is a test runner's. `extra`: more runners, as the
    program's name (`./run-tests.sh`, `rake`) or its name and first word (`bin/rails test`)."""
    words = status_command(command)
    return words is not None and _is_runner(words, frozenset(extra))


def status_command(command: str) -> list[str] | None:
    """The words of the simple command whose exit status the whole command returns, or
    None when that is not one plain command (a negation, a loop, an expansion)."""
    tree = parse(command)
    if tree.root_node.has_error:
        return None
    node = _last_statement(tree.root_node)
    while node is not None and node.type != "command":
        node = _status_of(node)
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


def ran_no_tests(output: str) -> bool:
    """A runner that exited 0 but says it ran nothing."""
    tail = output[-4000:]
    if re.search(r"\bno tests ran\b|\bRan 0 tests?\b|\bcollected 0 items\b", tail):
        return True
    if "no test files" in tail and not re.search(r"^ok\s", tail, re.MULTILINE):
        return True  # go test
    return bool(
        re.search(r"\brunning 0 tests\b", tail) and not re.search(r"\brunning [1-9]", tail)
    )  # cargo test


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
    name = os.path.basename(program)
    if program in extra or name in extra or " ".join(words[:2]) in extra:
        return True
    if name in WRAPPERS:
        rest = _after_wrapper(name, args)
        return rest is not None and _is_runner(rest, extra)
    if name in RUN_WRAPPERS and args[:1] == ["run"] and len(args) > 1:
        return _is_runner(args[1:], extra)
    if name in RUNNERS:
        return True
    if _PYTHON.match(name):
        return _python_module(args) in PYTHON_MODULES
    first = next((a for a in args if not a.startswith("-")), None)
    if name in SUBCOMMANDS and first in SUBCOMMANDS[name]:
        return True
    if name in SCRIPT_RUNNERS and first == "run":
        script = next((a for a in args[args.index("run") + 1 :] if not a.startswith("-")), "")
        return script in ("test", "tests")
    return False


def _after_wrapper(name: str, args: list[str]) -> list[str] | None:
    rest = list(args)
    while rest and (rest[0].startswith("-") or (name == "env" and "=" in rest[0])):
        rest.pop(0)
    if name == "timeout" and rest:
        rest.pop(0)  # the duration
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
