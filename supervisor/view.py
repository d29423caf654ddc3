"""The terminal view: a subscriber that turns events into lines on stderr (rich).

The top agent's text streams as it is written. Workers get one line when they start
and one when they end; their tool calls print as whole indented lines. On a terminal,
a live footer shows one line per running worker: profile, step, current tool, tokens.
All output goes through one lock, so lines from parallel workers never interleave.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from supervisor.terminal import console as safe_console
from workers.assembly.profiles import Profile, is_parallel_safe
from workers.log.events import Record
from workers.tools.base import Tool


def stderr_console() -> Console:
    # rich drops colour by itself when stderr is not a TTY or NO_COLOR is set.
    return safe_console(stderr=True, soft_wrap=True)


@dataclass
class _Worker:
    agent_id: str
    profile: str
    step: int = 0
    tool: str = ""
    tokens: int = 0


class TerminalView:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or stderr_console()
        self._lock = threading.RLock()
        self._mid_line = False
        self._workers: dict[str, _Worker] = {}
        self._live: Live | None = None
        self.shown_reply = ""
        """The top agent's latest reply as streamed here: a final answer already on the
        terminal is not printed again (supervisor/run_output.py)."""
        self._thinking = False
        """A "thinking…" line is on screen until the first word of the reply replaces it."""

    def __call__(self, record: Record) -> None:
        with self._lock:
            handler = getattr(self, "_on_" + record["event"], None)
            if handler is not None:
                handler(record)
            if record.get("agent_id") in self._workers:
                self._track(record)

    # -- output ------------------------------------------------------------------

    def _write(self, text: Text | str, *, newline: bool = True) -> None:
        if self._thinking:
            self.console.file.write("\r\x1b[2K")  # the line goes; what came replaces it
            self._thinking = False
        if newline and self._mid_line:
            self.console.print()
            self._mid_line = False
        self.console.print(text, end="\n" if newline else "", markup=False)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Nothing is printed meanwhile (the user answers a prompt): the footer goes, and
        other threads' events wait."""
        with self._lock:
            if self._live is not None:
                self._live.stop()
                self._live = None
            if self._mid_line:
                self.console.print()
                self._mid_line = False
            yield
            self._refresh_live()

    def _footer(self) -> Group:
        lines = []
        for w in self._workers.values():
            line = Text(f"  ⋯ {w.agent_id} {w.profile}", style="bold")
            line.append(f" · step {w.step}", style="dim")
            if w.tool:
                line.append(f" · {w.tool}", style="cyan")
            line.append(f" · {w.tokens} tok", style="dim")
            lines.append(line)
        return Group(*lines)

    def _refresh_live(self) -> None:
        if not self.console.is_terminal:
            return
        if self._workers and self._live is None:
            if self._mid_line:
                self.console.print()
                self._mid_line = False
            self._live = Live(
                self._footer(), console=self.console, refresh_per_second=8, transient=True
            )
            self._live.start()
        elif self._live is not None and not self._workers:
            self._live.stop()
            self._live = None
        elif self._live is not None:
            self._live.update(self._footer())

    def _track(self, record: Record) -> None:
        worker = self._workers[record["agent_id"]]
        match record["event"]:
            case "turn_start":
                worker.step, worker.tool = record["step"], "thinking"
            case "tool_start":
                worker.tool = f"{record['name']} {record.get('label', '')}".strip()
            case "llm_call":
                worker.tokens += record.get("total_tokens", 0)
                worker.tool = ""
        self._refresh_live()

    # -- events ------------------------------------------------------------------

    def _on_turn_start(self, record: Record) -> None:
        if "parent_id" in record:
            return  # a worker's thinking shows in the footer
        self.shown_reply = ""
        if record.get("step") == 1 and self.console.is_terminal and not self._mid_line:
            self.console.file.write("thinking…")
            self.console.file.flush()
            self._thinking = True

    def _on_text_delta(self, record: Record) -> None:
        if "parent_id" in record:
            return  # a worker's prose is in its report; only the top agent streams
        text: str = record["text"]
        self.shown_reply += text
        self._write(text, newline=False)
        if text:
            self._mid_line = not text.endswith("\n")

    def _on_tool_call(self, record: Record) -> None:
        worker = "parent_id" in record
        line = Text(f"  {record['agent_id']} " if worker else "", style="dim")
        line.append(f"[step {record['step']}] ", style="dim")
        line.append(record["name"], style="cyan" if worker else "bold cyan")
        if record.get("label"):
            line.append(f" {record['label']}", style="dim" if worker else "")
        line.append(" → ", style="dim")
        line.append(record.get("summary") or "done", style="red" if record["is_error"] else "green")
        facts = record.get("facts") or {}
        if facts.get("denied"):  # why, in its own words: the policy's reason
            why = str(record.get("result_preview") or "").split("\n", 1)[0]
            line.append(f" · {why}", style="red")
        self._write(line)
        if not record["is_error"]:
            for diff_line in _edit_preview(record, "  " if worker else ""):
                self._write(diff_line)

    def _on_delegate_start(self, record: Record) -> None:
        child = record["child_id"]
        self._workers[child] = _Worker(child, record["child_profile"])
        task = " ".join(str(record["task"]).split())
        line = Text(f"→ {child} ", style="bold")
        line.append(record["child_profile"], style="bold magenta")
        line.append(f": {task if len(task) <= 100 else task[:99] + '…'}")
        self._write(line)
        self._refresh_live()

    def _on_delegate_end(self, record: Record) -> None:
        self._workers.pop(record["child_id"], None)
        ok = record["status"] == "completed"
        line = Text(
            f"{'✓' if ok else '✗'} {record['child_id']} ", style="bold green" if ok else "bold red"
        )
        line.append(record["child_profile"], style="magenta")
        line.append(
            f" {record['status']} · {record['steps']} steps · {record['tokens']} tok · "
            f"{record['elapsed_s']:.1f}s · {len(record.get('files_changed', []))} files changed"
        )
        if not ok:
            line.append(f" · {record['reason']}", style="red")
        self._write(line)
        self._refresh_live()

    def _on_verification(self, record: Record) -> None:
        if record.get("action") == "sent_back":
            who = f"{record['agent_id']} " if "parent_id" in record else ""
            self._write(
                Text(f"  gaffer sent {who}back to work: {record['reason']}", style="yellow")
            )

    def _on_fresh_attempt(self, record: Record) -> None:
        who = f"{record['agent_id']}: " if "parent_id" in record else ""
        what = f"drew the change afresh (sample {record['attempt']}, temperature {record['temperature']})"
        if made_from := record.get("made_from"):
            what = f"joined samples {made_from[0]} and {made_from[1]}"
        self._write(
            Text(
                f"  {who}gaffer {what}: {record['reason']}",
                style="green" if record.get("kept") else "yellow",
            )
        )

    def _on_llm_retry(self, record: Record) -> None:
        self._write(
            Text(
                f"  {record['agent_id']} [step {record['step']}] model call failed (attempt "
                f"{record['attempt']}: {record['error']}); retrying in {record['wait_s']:.1f}s",
                style="yellow",
            )
        )

    def _on_limit(self, record: Record) -> None:
        who = f"{record['agent_id']} " if "parent_id" in record else ""
        self._write(
            Text(f"{who}stopped: {record['limit']} limit: {record['detail']}", style="bold yellow")
        )

    def _on_agent_end(self, record: Record) -> None:
        if "parent_id" not in record and self._mid_line:
            self.console.print()
            self._mid_line = False

    def _on_extension(self, record: Record) -> None:
        if record.get("status") == "skipped":
            self._write(Text(f"gaffer: warning: {record['message']}", style="yellow"))

    def _on_boundary(self, record: Record) -> None:
        self._write(Text(f"gaffer: {record['message']}", style="yellow"))

    def _on_session_end(self, _record: Record) -> None:
        self._workers.clear()
        self._refresh_live()


EDIT_PREVIEW_LINES = 3


def _edit_preview(record: Record, indent: str) -> list[Text]:
    """A few lines of what an edit changed, under its tool line."""
    args = record.get("args")
    if not isinstance(args, dict):
        return []
    if record["name"] == "edit_file":
        old = str(args.get("old_text", "")).splitlines()
        new = str(args.get("new_text", "")).splitlines()
        shown = [Text(f"{indent}    - {line}", style="red") for line in old[:EDIT_PREVIEW_LINES]]
        shown += [Text(f"{indent}    + {line}", style="green") for line in new[:EDIT_PREVIEW_LINES]]
        if len(old) > EDIT_PREVIEW_LINES or len(new) > EDIT_PREVIEW_LINES:
            shown.append(Text(f"{indent}    …", style="dim"))
        return shown
    if record["name"] == "write_file":
        lines = str(args.get("content", "")).splitlines()
        return [Text(f"{indent}    + {len(lines)} lines written", style="green")]
    return []


def profiles_table(profiles: dict[str, Profile], tools: dict[str, Tool[Any]]) -> Table:
    """Profiles with their tools, sandbox, limits, parallel safety and source."""
    read_only = {name: tool.read_only for name, tool in tools.items()}
    extensions = {n for n, t in tools.items() if t.kind == "extension"}
    table = Table(box=None, pad_edge=False)
    for column in ("profile", "tools", "sandbox", "limits", "parallel-safe", "from"):
        table.add_column(column, overflow="fold")
    for profile in profiles.values():
        limits = profile.limits
        table.add_row(
            profile.name,
            ", ".join(profile.tools),
            profile.sandbox,
            f"{limits.max_steps} steps"
            + (f", {limits.max_seconds:g}s" if limits.max_seconds else "")
            + (f", {limits.max_tokens} tok" if limits.max_tokens else ""),
            "yes" if is_parallel_safe(profile, read_only, extensions) else "no",
            profile.source,
        )
    return table


def tools_table(tools: dict[str, Tool[Any]], grants: dict[str, list[str]]) -> Table:
    """Every tool with its origin, whether it is read-only, and which profiles get it;
    the harness's own (`delegate`, `use_skill`) too, built per agent as they are."""
    table = Table(box=None, pad_edge=False)
    for column in ("tool", "origin", "read-only", "profiles"):
        table.add_column(column, overflow="fold")
    for name, tool in tools.items():
        table.add_row(
            name,
            tool.origin,
            "yes" if tool.read_only else "no",
            ", ".join(grants.get(name, [])) or "-",
        )
    if "delegate" not in tools:
        table.add_row("delegate", "harness", "no", ", ".join(grants.get("delegate", [])) or "-")
    if "use_skill" not in tools:
        table.add_row("use_skill", "harness", "yes", "every agent, once there are skills")
    return table
