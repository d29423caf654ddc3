"""What may run: the run's rules and mode, judged before every tool call of every agent.

One `Permissions` is made per run and every agent gets a `PermissionGuard` over it when
it is built (workers/assembly/build.py), whatever its profile, so a rule written once
holds for the supervisor and each worker alike, on the host and in containers: the call
is judged here, on the host, before it goes to the sandbox. A profile cannot widen the
rules; it only has the tools it has.

The order: a deny rule, then an ask rule, then an allow rule; what none matches is left
to the mode (workers/permissions/modes.py). An ask goes to the user at a terminal, saying
which agent asks; with no terminal it is a deny that says what would let the call run.
"""

from __future__ import annotations

import difflib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from workers.facts import Facts
from workers.guard_hooks import Guard, PendingCall
from workers.log.events import Emitter
from workers.log.schema import PermissionAsked
from workers.permissions.commands import plain
from workers.permissions.modes import EDITS, Mode
from workers.permissions.rules import SHELL, Call, Match, RuleSet
from workers.tools import shell_policy
from workers.tools.base import Approver, ToolResult
from workers.tools.workspace import read_confined

PREVIEW_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Ask:
    """A call waiting for the user's yes."""

    agent: str
    """Who asks: `supervisor`, or `w2 (coder, in its container)`."""
    tool: str
    what: str
    """The command, or the path, as the user reads it."""
    why: str
    preview: str = ""
    """An edit's diff."""


Asker = Callable[[Ask], bool]
"""Asks the user; True runs the call."""


@dataclass(frozen=True)
class Verdict:
    action: Literal["allow", "ask", "deny"]
    why: str
    """Said to the model and the user: the rule and where it came from, or the mode."""
    match: Match | None = None
    unasked: str = ""
    """For an ask with no one to ask: what would let it run."""


@dataclass(frozen=True)
class Actor:
    """The agent a call is judged for."""

    agent_id: str
    profile: str
    in_container: bool
    read_only_tools: frozenset[str]
    workspace: Path
    container_root: str | None = None

    def __str__(self) -> str:
        if self.agent_id == "supervisor":
            return "supervisor"
        where = ", in its container" if self.in_container else ""
        return f"{self.agent_id} ({self.profile}{where})"


class Permissions:
    """The run's rules and mode, its way of asking, and what the host's shell may run
    because this gate cleared it."""

    def __init__(
        self,
        rules: RuleSet | None = None,
        mode: Mode = "auto",
        asker: Asker | None = None,
        *,
        yes: bool = False,
    ) -> None:
        self.rules = rules or RuleSet()
        self.mode = mode
        self.asker = asker
        """None: no terminal; an ask is a deny."""
        self.yes = yes
        """--yes: host commands outside the read-only allowlist run unasked."""
        self._asking = threading.Lock()  # one question at a time, whichever worker asks
        self._cleared = threading.local()

    def verdict(self, actor: Actor, tool: str, arguments: dict[str, Any]) -> Verdict:
        """What the rules and the mode say of this call, before anyone is asked."""
        call = Call(tool, arguments, actor.workspace, actor.container_root)
        match = self.rules.match(call)
        if match is not None:
            rule = match.rule
            if rule.action == "deny" and not match.unsure:
                return Verdict("deny", f"denied by rule {rule.said()}", match)
            if rule.action == "deny":
                part = match.part if match.part.strip(" …") else str(arguments.get("command", ""))
                return Verdict(
                    "ask",
                    f"gaffer cannot tell before it runs whether `{part}` is what rule "
                    f"{rule.said()} denies",
                    match,
                    "write the command out plainly, without variables or substitutions in it",
                )
            if rule.action == "ask":
                return Verdict(
                    "ask",
                    f"rule {rule.said()}",
                    match,
                    "narrow or remove that ask rule (an allow rule cannot: ask wins over allow)",
                )
            if not self._planning(actor, tool):
                return Verdict("allow", f"allowed by rule {rule.said()}", match)
        return self._by_mode(actor, tool, arguments)

    def _planning(self, actor: Actor, tool: str) -> bool:
        """Plan mode holds back what is not read-only, whatever an allow rule says."""
        return self.mode == "plan" and tool not in actor.read_only_tools and tool != "delegate"

    def _by_mode(self, actor: Actor, tool: str, arguments: dict[str, Any]) -> Verdict:
        if self._planning(actor, tool):
            return Verdict("deny", "plan mode: read-only tools only; write the plan as your answer")
        if tool in EDITS and self.mode == "ask-edits":
            return Verdict(
                "ask",
                "--mode ask-edits asks before every edit",
                unasked="run at a terminal to be asked, or use --mode auto",
            )
        if tool != SHELL:
            return Verdict("allow", "")
        command = str(arguments.get("command", ""))
        asks_in_container = self.mode == "ask-edits"
        if actor.in_container and not asks_in_container:
            return Verdict("allow", "")
        if not actor.in_container and (self.yes or self.mode == "full-auto"):
            return Verdict("allow", "--yes" if self.yes else "--mode full-auto")
        allowance = shell_policy.check(command, actor.workspace)
        if allowance.allowed:
            return Verdict("allow", "")
        return Verdict(
            "ask",
            allowance.reason,
            unasked=(
                "run at a terminal to be asked, or use --mode auto"
                if actor.in_container
                else "pass --yes or --mode full-auto, or allow it in your config: "
                f"[permissions] allow = [{json.dumps(_allow_rule(command))}]"
            ),
        )

    def decide(
        self, actor: Actor, tool: str, arguments: dict[str, Any], events: Emitter | None = None
    ) -> str | None:
        """None when the call may run (asking the user if it must); else the one line
        that refuses it, for the model and the user."""
        verdict = self.verdict(actor, tool, arguments)
        if verdict.action == "allow":
            self._clear(tool, arguments)
            return None
        if verdict.action == "deny":
            return f"not run: {verdict.why}"
        if self.asker is None:
            return f"not run: it asks first ({verdict.why}) and there is no terminal to ask at; to let it run, {verdict.unasked}"
        ask = Ask(
            str(actor),
            tool,
            _what(tool, arguments),
            verdict.why,
            self._preview(actor, tool, arguments),
        )
        with self._asking:
            yes = self.asker(ask)
        if events is not None:
            events.emit(
                PermissionAsked(
                    tool=tool, what=ask.what, why=verdict.why, answer="yes" if yes else "no"
                )
            )
        if not yes:
            return f"not run: the user said no ({verdict.why})"
        self._clear(tool, arguments)
        return None

    def _clear(self, tool: str, arguments: dict[str, Any]) -> None:
        if tool == SHELL:
            self._cleared.command = str(arguments.get("command", ""))

    def host_approver(self, otherwise: Approver) -> Approver:
        """The host shell's own approver: it passes the command this gate just cleared on
        this thread; a command that did not come through the gate goes to `otherwise`."""

        def approve(command: str, reason: str) -> bool:
            cleared = getattr(self._cleared, "command", None)
            self._cleared.command = None
            return cleared == command or otherwise(command, reason)

        return approve

    def _preview(self, actor: Actor, tool: str, arguments: dict[str, Any]) -> str:
        """The diff an edit would make, for the user to judge."""
        path = str(arguments.get("path", ""))
        if tool not in EDITS or not path:
            return ""
        root = actor.container_root
        if root and path.startswith(root + "/"):
            path = path[len(root) + 1 :]
        old, new = str(arguments.get("old_text", "")), str(arguments.get("new_text", ""))
        try:
            data = read_confined(actor.workspace, path, PREVIEW_BYTES)
        except Exception:  # the tool will say what is wrong with the path
            data = None
        if data is not None and len(data) > PREVIEW_BYTES and tool == "edit_file":
            data = None  # too big to diff whole: the edit's own text is the diff
        before = (data or b"").decode("utf-8", errors="replace")
        if tool == "write_file":
            after = str(arguments.get("content", ""))
        elif data is None or old not in before:
            before, after = old, new
        else:
            after = before.replace(old, new, 1)
        lines = difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"a/{path}",
            f"b/{path}",
        )
        return "".join(lines)


def _allow_rule(command: str) -> str:
    """The allow rule that would let this command run: itself, when an allow rule can
    cover it as written, else its first words and any after them."""
    if plain(command) and len(command) <= 80:
        return f"run_shell({command})"
    return f"run_shell({' '.join(command.split()[:2])}:*)"


def _what(tool: str, arguments: dict[str, Any]) -> str:
    for key in ("command", "path", "profile"):
        if key in arguments:
            return str(arguments[key])
    return tool


class PermissionGuard(Guard):
    """An agent's calls through the run's permissions: asked last of the guards, so a
    call another guard refuses never reaches the user."""

    def __init__(self, permissions: Permissions, actor: Actor, events: Emitter) -> None:
        self.permissions = permissions
        self.actor = actor
        self.events = events

    def refuses_unasked(self, tool: str, arguments: dict[str, Any]) -> str | None:
        """Why a read the harness would make for the agent (a file its task names) may
        not be made unasked; None: the rules let it."""
        verdict = self.permissions.verdict(self.actor, tool, arguments)
        return None if verdict.action == "allow" else f"not read: {verdict.why}"

    def before_call(self, call: PendingCall) -> ToolResult | None:
        if not isinstance(call.arguments, dict):
            return None  # the executor says what is wrong with them
        refusal = self.permissions.decide(self.actor, call.name, call.arguments, self.events)
        if refusal is None:
            return None
        # a held-back call is a denied one in the run's outcome (supervisor/run_end.py)
        command = call.arguments.get("command") if call.name == SHELL else None
        facts = Facts(command=str(command) if command is not None else None, denied=True)
        return ToolResult(output=refusal, summary="denied", is_error=True, facts=facts)
