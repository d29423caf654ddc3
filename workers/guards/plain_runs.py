"""Which test runs can stand for the tests a task keeps (workers/guards/task_rules.py).

The snapshots between calls see what a call left behind, not what it did on the way: a
command that writes a conftest.py passing every test, runs pytest and deletes it leaves
nothing to see. So where a task keeps its tests, a run counts for them only when it does
nothing but run them: the runner from the system or the workspace (and `cd` within the
workspace), no variable or interpreter option that changes what runs, no argument that
picks the tests or passes options on to another runner. The task's own named command
always counts. Anything else is logged as `steered`, and the gate asks for a plain run.

What this cannot see is code that cheats from inside the run: the code under test is
the agent's own, and runs in the test process.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from tree_sitter import Node

from workers.guards.test_runs import Invocation, invocation, node_text, status_command, status_node
from workers.tools.shell_policy import literal, parse

# pytest's options that pick which tests run, or what a run loads or reads its settings
# from; their short forms also inside a cluster (`-qk name`).
PYTEST_PICKING = frozenset(
    {"--deselect", "--ignore", "--ignore-glob", "--config-file", "--override-ini"}
    | {"--noconftest", "--confcutdir", "--rootdir", "--pyargs", "--lf", "--last-failed"}
    | {"--sw", "--stepwise", "--stepwise-skip", "--plugin", "--import-mode", "--basetemp"}
)
PYTEST_PICKING_SHORT = frozenset("kmpco")
# pytest's short options that take a value: the rest of a cluster after one is its value.
_PYTEST_VALUED_SHORT = frozenset("kmpcorWn")
# Plugins a run may turn off (`-p no:cacheprovider`): none of them holds tests.
_HARMLESS_PLUGINS = frozenset({"cacheprovider", "randomly", "xdist", "warnings", "cov"})
# What the other runners may be given besides their subcommand: output, never options
# passed on to the runner beneath (`tox -- -k x`, `make test PYTEST_ADDOPTS=-kx`).
_QUIET = frozenset({"-q", "--quiet", "-v", "--verbose", "-s", "--silent"})
_UNITTEST_ARGS = _QUIET | {"-b", "--buffer", "-f", "--failfast", "--locals", "discover"}
_UNITTEST_PATHS = frozenset({"-s", "--start-directory", "-t", "--top-level-directory"})
_GO_FLAGS = frozenset({"-v", "-race", "-count=1", "-short"})
_CARGO_FLAGS = frozenset({"--release", "--workspace", "--all", "--all-features"})
# Python options that leave what runs alone.
_PLAIN_PYTHON = frozenset({"-u", "-B", "-b", "-bb", "-I", "-E", "-s", "-O", "-OO", "-q"})
# Variables that change what a run loads or where it looks: never set for a plain run.
_STEERING_PREFIXES = ("PYTHON", "PYTEST", "LD_", "DYLD_", "TOX_", "NOX_", "npm_config_")
_STEERING_NAMES = frozenset(
    {"PATH", "HOME", "BASH_ENV", "ENV", "CDPATH", "XDG_CONFIG_HOME", "MAKEFLAGS", "MAKEFILES"}
    | {"NODE_OPTIONS", "NODE_PATH", "GOFLAGS", "RUSTFLAGS", "CARGO_HOME", "CARGO_TARGET_DIR"}
)
_HARMLESS_PYTHON = frozenset({"PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"})
_HARMLESS_PYTHON |= frozenset({"PYTHONWARNINGS", "PYTHONIOENCODING", "PYTHONUTF8"})
# What a container's commands can write outside the workspace (its /tmp and HOME): a
# runner from there could be anything the agent put there. On the host, a program outside
# the workspace is the user's own (a virtual environment under /tmp or in their home),
# and the guarded shell asks before writing there.
CONTAINER_SCRATCH = ("/tmp/", "/var/tmp/", "/dev/shm/", "/run/", "/home/gaffer/", "~")
# Shell settings a plain run may make first (`set -e; pytest`).
_PLAIN_SET = frozenset({"-e", "-u", "-x", "-o", "pipefail", "-eu", "-ex", "-eux", "-euo"})


def steered(
    command: str,
    extra: Iterable[str] = (),
    roots: Iterable[str] = (),
    scratch: tuple[str, ...] = CONTAINER_SCRATCH,
) -> str | None:
    """Why a test run cannot stand for the tests a task keeps, or None when it can.
    `roots`: the workspace's absolute paths as the command sees it (the container's
    /workspace, the host's folder); paths elsewhere are outside it. `scratch`: folders
    outside it the agent's commands can write to, where no runner counts."""
    tree = parse(command)
    status = status_node(tree)
    found = invocation(status_command(command) or [""], frozenset(extra))
    if status is None or found is None:
        return "it is not one plain test command"
    inside = _Inside(tuple(roots) or ("/workspace",))
    return (
        _besides(tree.root_node, status, inside)
        or _from_elsewhere(found, inside, scratch)
        or _picking(found, inside, frozenset(extra))
    )


class _Inside:
    """Whether a path a command names stays in the workspace, from the folder it is in."""

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = tuple(posixpath.normpath(r) for r in roots)
        self.cwd = "."

    def relative(self, path: str) -> str | None:
        """`path` as a workspace-relative path, or None when it leads out."""
        for root in self.roots:
            if path == root or path.startswith(root + "/"):
                path = path[len(root) :].lstrip("/") or "."
                break
        else:
            if path.startswith(("/", "~")):
                return None
            path = posixpath.join(self.cwd, path)
        joined = posixpath.normpath(path)
        return None if joined == ".." or joined.startswith("../") else joined


def _besides(root: Node, status: Node, inside: _Inside) -> str | None:
    """What else a command does than run `status`: another program, a variable set or
    unset, or a `cd` out of the workspace."""
    for node in _descendants(root):
        if node.type in ("declaration_command", "unset_command"):
            return f"it runs `{node_text(node).split()[0]}` too"
        if node.type == "variable_assignment":
            if why := _assignment(node, inside):
                return why
        elif node.type == "command" and node != status:
            words = [literal(w) for w in _words(node)]
            if words[:1] == ["set"] and all(w in _PLAIN_SET for w in words[1:]):
                continue
            if words[:1] != ["cd"]:
                return f"it runs `{words[0] or node_text(node)}` too"
            target = words[-1] if len(words) > 1 else "~"
            where = inside.relative(target) if target not in (None, "-") else None
            if where is None:
                return f"it runs the tests from {target or 'a folder it names by expansion'}"
            inside.cwd = where
    return None


def _assignment(node: Node, inside: _Inside) -> str | None:
    name_node = node.child_by_field_name("name")
    name = node_text(name_node) if name_node is not None else ""
    value = node.child_by_field_name("value")
    said = literal(value) if value is not None else ""
    if name == "PYTHONPATH":
        parts = (said or "").split(":")
        if said is None or any(inside.relative(p or ".") is None for p in parts):
            return "it sets PYTHONPATH outside the workspace"
        return None
    if name in _STEERING_NAMES or (
        name.startswith(_STEERING_PREFIXES) and name not in _HARMLESS_PYTHON
    ):
        return f"it sets {name}"
    return None


def _from_elsewhere(found: Invocation, inside: _Inside, scratch: tuple[str, ...]) -> str | None:
    """A runner, or Python, from outside the workspace and the system's folders, or run
    with options that change what it loads (`-X pycache_prefix=...`)."""
    for program in found.programs:
        planted = bool(scratch) and posixpath.normpath(program).startswith(scratch)
        outside = inside.relative(program) is None
        if "/" in program and outside and (planted or not program.startswith("/")):
            return f"it runs {program}, from outside the workspace"
    if odd := [o for o in found.interpreter_options if o not in _PLAIN_PYTHON]:
        return f"it runs Python with {odd[0]}"
    return None


def _picking(found: Invocation, inside: _Inside, extra: frozenset[str]) -> str | None:
    """The argument that picks which tests a runner runs, or what it loads."""
    args = list(found.args)
    if found.runner in extra:
        return None  # the user's own runner: its arguments are theirs
    if found.runner in ("pytest", "py.test"):
        return _pytest_picking(args, inside)
    if found.runner == "unittest":
        for n, arg in enumerate(args):
            if args[n - 1 : n] and args[n - 1] in _UNITTEST_PATHS and not inside.relative(arg):
                return f"it runs tests from outside the workspace ({arg})"
            if args[n - 1 : n] and args[n - 1] in _UNITTEST_PATHS | {"-p", "--pattern"}:
                continue
            if arg not in _UNITTEST_ARGS | _UNITTEST_PATHS | {"-p", "--pattern"}:
                return f"it picks which tests run ({arg})"
        return None
    subcommand = next((a for a in args if not a.startswith("-")), "")
    rest = [a for a in args if a != subcommand]
    if subcommand == "run" and rest:  # `npm run test`: the script's name
        rest.remove(next((a for a in rest if not a.startswith("-")), rest[0]))
    if found.runner == "go":
        rest = [a for a in rest if not (a.startswith(".") and inside.relative(a.rstrip(".")))]
        allowed = _GO_FLAGS
    else:
        allowed = _QUIET | (_CARGO_FLAGS if found.runner == "cargo" else frozenset())
    if odd := [a for a in rest if a not in allowed]:
        return f"it passes {odd[0]} on to the tests"
    return None


def _pytest_picking(args: list[str], inside: _Inside) -> str | None:
    taken = False  # the word is the value of the option before it
    for n, arg in enumerate(args):
        before = args[n - 1] if n else ""
        if taken or (_long_without_value(before) and not arg.startswith("-")):
            taken = False
            if not arg.endswith(".py"):
                continue
        why, taken = _pytest_arg(arg, args[n + 1] if n + 1 < len(args) else "", inside)
        if why:
            return why
    return None


def _long_without_value(arg: str) -> bool:
    return arg.startswith("--") and "=" not in arg


def _pytest_arg(arg: str, after: str, inside: _Inside) -> tuple[str | None, bool]:
    """Why one pytest argument picks the tests, and whether the next word is its value."""
    if arg in ("-p", "--plugin") or arg.startswith("-p"):
        plugin = after if arg in ("-p", "--plugin") else arg[2:].lstrip("=")
        if plugin.startswith("no:") and plugin[3:] in _HARMLESS_PLUGINS:
            return None, arg in ("-p", "--plugin")
        return f"it picks which tests run ({arg})", False
    if arg.startswith("@"):
        return f"it reads its arguments from {arg[1:]}", False
    if arg.startswith("--"):
        picks = arg.split("=", 1)[0] in PYTEST_PICKING
        return (f"it picks which tests run ({arg})" if picks else None), False
    if arg.startswith("-") and len(arg) > 1:
        for letter in arg[1:]:
            if letter in PYTEST_PICKING_SHORT:
                return f"it picks which tests run ({arg})", False
            if letter in _PYTEST_VALUED_SHORT:
                return None, len(arg) == 2
        return None, False
    if "::" in arg:
        return f"it picks which tests run ({arg})", False
    if inside.relative(arg) is None:
        return f"it runs tests from outside the workspace ({arg})", False
    return None, False


def _words(command: Node) -> list[Node]:
    """A simple command's name and arguments, without its assignments and redirections."""
    words = []
    for child in command.named_children:
        if child.type == "command_name" and child.named_child_count == 1:
            child = child.named_children[0]
        if child.type not in ("variable_assignment", "file_redirect", "herestring_redirect"):
            words.append(child)
    return words


def _descendants(node: Node) -> Iterable[Node]:
    for child in node.named_children:
        yield child
        yield from _descendants(child)
