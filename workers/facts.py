"""What one tool call taught the harness, as the harness saw it: files changed, a command
and how it ended, a worker and what it did. Never what the model said.

Facts are made by the tools (on the host or in a container, where they cross the channel
as JSON), and read by the verification gate, the context keeper's task state, worker
reports and change sets. In the log they are the `facts` of a `tool_call` line, written
with only the fields that are set.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

TOOL_FACTS = frozenset(
    {"modified", "command", "exit_code", "timed_out", "denied", "output_file", "memory"}
)
"""What a tool itself may report; the rest (the container, a worker and its evidence)
only the harness writes, and a tool server that sends it is not believed."""


class BadFacts(ValueError):
    """Facts that do not have the shape gaffer writes: a broken or hostile tool server."""


@dataclass(frozen=True)
class Facts:
    modified: tuple[str, ...] = ()
    """Workspace-relative paths the call changed. For an agent that can change files the
    harness sets them from snapshots, whatever the tool said (workers/changes/change_sets.py)."""
    command: str | None = None
    """A shell command it ran (or was refused)."""
    exit_code: int | None = None
    """How the command exited; None when it was killed or never ran."""
    timed_out: bool = False
    denied: bool = False
    """The command needed approval and did not get it: it never ran."""
    output_file: str | None = None
    """Where the command's whole output was saved, when it was cut for the model."""
    container: str | None = None
    """The container the call ran in."""
    memory: bool = False
    """It wrote the project memory (AGENT.md)."""
    no_tests: bool = False
    """A test run that exited 0 but says it ran no tests (the harness reads its output)."""
    worker: str | None = None
    """A delegation: the worker's id; its own calls are `evidence`."""
    status: str | None = None
    """A delegation: how the worker ended."""
    evidence: tuple[Facts, ...] = field(default=())
    """A delegation: the facts of every call the worker made, in order."""

    @property
    def ran_command(self) -> bool:
        return self.command is not None

    def as_json(self) -> dict[str, Any]:
        """The fields that are set, as JSON values: for the log and the container channel."""
        data: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "evidence":
                if self.worker is not None:  # a worker that did nothing still says so
                    data[f.name] = [e.as_json() for e in value]
            elif value != f.default:
                data[f.name] = list(value) if isinstance(value, tuple) else value
        return data

    @classmethod
    def from_json(cls, data: object, allowed: frozenset[str] | None = None) -> Facts:
        """Facts as `as_json` wrote them, with only the `allowed` fields if given;
        BadFacts for anything else."""
        if not isinstance(data, dict):
            raise BadFacts(f"facts must be an object, not {type(data).__name__}")
        known = {f.name for f in fields(cls)} if allowed is None else allowed
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name not in known:
                raise BadFacts(f"a fact {name!r} is not for this sender to give")
            values[name] = _checked(name, value)
        return cls(**values)


_STRINGS = frozenset({"command", "output_file", "container", "worker", "status"})
_FLAGS = frozenset({"timed_out", "denied", "memory", "no_tests"})
_PATHS = frozenset({"modified"})


def _checked(name: str, value: object) -> Any:
    if name in _PATHS:
        if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
            raise BadFacts(f"{name} must be a list of paths")
        return tuple(value)
    if name == "evidence":
        if not isinstance(value, list):
            raise BadFacts("evidence must be a list")
        return tuple(Facts.from_json(item) for item in value)
    if name == "exit_code":
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise BadFacts("exit_code must be a number or null")
        return value
    if name in _FLAGS:
        if not isinstance(value, bool):
            raise BadFacts(f"{name} must be true or false")
        return value
    if name in _STRINGS and value is not None and not isinstance(value, str):
        raise BadFacts(f"{name} must be text")
    return value
