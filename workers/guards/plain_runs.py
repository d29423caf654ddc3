"""Which test runs can stand for the tests a task keeps (workers/guards/task_rules.py).

The snapshots between calls see what a call left behind, not what it did on the way: a
command that writes a conftest.py passing every test, runs pytest and deletes it leaves
nothing to see. So where a task keeps its tests, a run counts for them only when it does
nothing but run them: the runner (and `cd` within the workspace), no variable that
changes what runs, no option that picks the tests. The task's own named command always
counts. Anything else is logged as `steered`, and the gate asks for a plain run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from tree_sitter import Node

from workers.guards.test_runs import node_text, runner_and_args, status_command, status_node
from workers.tools.shell_policy import literal, parse

# Options that pick which tests run, or what a run loads: a pass with them says nothing
# about the tests a task keeps (`-p no:name` only turns a plugin off, and is allowed).
SELECTING: dict[str, frozenset[str]] = {
    "pytest": frozenset(
        {"-k", "-m", "--deselect", "--ignore", "--ignore-glob", "-p", "-c", "--config-file"}
        | {"-o", "--override-ini", "--noconftest", "--confcutdir", "--rootdir", "--pyargs"}
        | {"--lf", "--last-failed", "--sw", "--stepwise", "--stepwise-skip"}
    ),
    "unittest": frozenset({"-k"}),
}
SELECTING["py.test"] = SELECTING["pytest"]
# What a run that stands for kept tests may set besides: output and hashing, and where
# the workspace's own code is found (a relative PYTHONPATH).
_PLAIN_VARIABLES = frozenset({"PYTHONPATH", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE"})
_PLAIN_VARIABLES |= frozenset({"CI", "NO_COLOR", "TERM", "COLUMNS", "PYTHONUNBUFFERED"})


def steered(command: str, extra: Iterable[str] = ()) -> str | None:
    """Why a test run cannot stand for the tests a task keeps, or None when it can: it
    runs nothing but the runner (and `cd`), sets nothing that changes what runs, and
    picks no tests with an option. A command that writes a conftest.py and runs the
    tests in one go is seen by no snapshot between calls; this is what it cannot hide."""
    tree = parse(command)
    status = status_node(tree)
    found = runner_and_args(status_command(command) or [""], frozenset(extra))
    if status is None or found is None:
        return "it is not one plain test command"
    return _besides(tree.root_node, status) or _picking(*found)


def _besides(root: Node, status: Node) -> str | None:
    """What else a command does than run `status`: another program, or a variable set."""
    for node in _descendants(root):
        if node.type == "variable_assignment":
            name = node.child_by_field_name("name")
            value = node.child_by_field_name("value")
            said = literal(value) if value is not None else ""
            if name is None or node_text(name) not in _PLAIN_VARIABLES:
                return f"it sets {node_text(name) if name is not None else 'a variable'}"
            if said is None or said.startswith("/") or ".." in said.split(os.pathsep):
                return f"it sets {node_text(name)} outside the workspace"
        elif node.type == "command" and node != status:
            name = node.child_by_field_name("name")
            if name is not None and name.named_child_count == 1:
                name = name.named_children[0]
            program = literal(name) if name is not None else None
            if program != "cd":
                return f"it runs `{program or node_text(node)}` too"
            if (where := _cd_target(node)) is not None:
                return f"it runs the tests from {where}"
    return None


def _cd_target(cd: Node) -> str | None:
    """Where a `cd` goes when that is not a folder of the workspace ("/tmp", "..", "~"),
    else None. The container's workspace is /workspace."""
    words = [literal(a) for a in cd.named_children[1:]]
    if not words:
        return "the home folder"
    target = words[-1]
    if target is None or target == "-" or target.startswith("~"):
        return "a folder it names by expansion"
    inside = target == "/workspace" or target.startswith("/workspace/")
    if (target.startswith("/") and not inside) or ".." in target.split("/"):
        return target
    return None


def _picking(runner: str, args: list[str]) -> str | None:
    """The option that picks which tests a runner runs, or what it loads."""
    options = SELECTING.get(runner, frozenset())
    for n, arg in enumerate(args):
        if arg == "-p" and args[n + 1 : n + 2] and args[n + 1].startswith("no:"):
            continue  # a plugin turned off
        if arg.startswith("-p") and arg[2:].startswith("no:"):
            continue
        short = len(arg) > 2 and arg[1] != "-" and arg[:2] in options  # `-ktest_a`
        if arg.split("=", 1)[0] in options or short:
            return f"it picks which tests run ({arg})"
    return None


def _descendants(node: Node) -> Iterable[Node]:
    for child in node.named_children:
        yield child
        yield from _descendants(child)
