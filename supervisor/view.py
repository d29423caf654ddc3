"""The terminal view: a subscriber that turns events into lines on stderr (rich).

The top agent's text streams as it is written. Workers get one line when they start
and one when they end; their tool calls print as whole indented lines. On a terminal,
a live footer shows one line per running worker: profile, step, current tool, tokens.
All output goes through one lock, so lines from parallel workers never interleave.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from supervisor.costs import cost_of, dollars, usage_of
from supervisor.settings import Price
from supervisor.terminal import console as safe_console
from workers.log.events import Record
from workers.log.reader import Line, line_of
from workers.log.schema import (
    AgentEnd,
    Boundary,
    CheckChosen,
    CheckRan,
    DelegateEnd,
    DelegateStart,
    Extension,
    FreshAttempt,
    HookRan,
    Limit,
    LlmCall,
    LlmRetry,
    SessionEnd,
    TextDelta,
    ToolCalled,
    ToolStart,
    TurnStart,
    Verification,
)

PROGRESS_EVERY_S = 15.0
"""Through a pipe, a model call in flight this long with nothing from it yet gets a line
(and another each time this long again passes): no silent waits."""
TICK_S = 1.0


@dataclass
class _InFlight:
    step: int
    since: float
    said_at: float


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
        self._in_flight: dict[str, _InFlight] = {}
        """Model calls asked for and not yet answered (no word of a reply), by agent."""
        self._ticking = threading.Event()
        self._ticker: threading.Thread | None = None
        self.prices: Mapping[str, Price] = {}
        """What each model's tokens cost (set once the run's config is read)."""
        self._calls: dict[str, list[LlmCall]] = {}

    def __call__(self, record: Record) -> None:
        line = line_of(record)
        if line is None:
            return
        with self._lock:
            if isinstance(line.event, LlmCall):
                self._calls.setdefault(line.agent_id or "?", []).append(line.event)
            handler = getattr(self, "_on_" + line.event.event, None)
            if handler is not None:
                handler(line, line.event)
            if line.agent_id in self._workers:
                self._track(line)

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

    def _track(self, line: Line) -> None:
        worker = self._workers[line.agent_id]
        match line.event:
            case TurnStart(step=step):
                worker.step, worker.tool = step, "thinking"
            case ToolStart(name=name, label=label):
                worker.tool = f"{name} {label}".strip()
            case LlmCall(total_tokens=tokens):
                worker.tokens += tokens
                worker.tool = ""
        self._refresh_live()

    # -- events: _on_<event> for each event shown, given its line and the event -------

    # -- waiting: every model call in flight is said to be so ----------------------

    def _waiting(self, agent_id: str, step: int) -> None:
        now = time.monotonic()
        self._in_flight[agent_id] = _InFlight(step, now, now)
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="gaffer-waiting", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._ticking.wait(TICK_S):
            with self._lock:
                now = time.monotonic()
                for agent_id, call in self._in_flight.items():
                    waited = now - call.since
                    if self.console.is_terminal:
                        if agent_id == self._top_id and self._thinking:
                            self.console.file.write(f"\r\x1b[2Kthinking… {waited:.0f}s")
                            self.console.file.flush()
                    elif now - call.said_at >= PROGRESS_EVERY_S:
                        call.said_at = now
                        self._write(
                            f"gaffer: waiting for the model: {agent_id} step {call.step}, "
                            f"{waited:.0f} s so far"
                        )

    def _answered(self, agent_id: str) -> None:
        self._in_flight.pop(agent_id, None)

    _top_id = "supervisor"

    def _on_turn_start(self, line: Line, e: TurnStart) -> None:
        self._waiting(line.agent_id, e.step)
        if line.parent_id is not None:
            return  # a worker's thinking shows in the footer
        self.shown_reply = ""
        if e.step == 1 and self.console.is_terminal and not self._mid_line:
            self.console.file.write("thinking…")
            self.console.file.flush()
            self._thinking = True

    def _on_text_delta(self, line: Line, e: TextDelta) -> None:
        self._answered(line.agent_id)
        if line.parent_id is not None:
            return  # a worker's prose is in its report; only the top agent streams
        self.shown_reply += e.text
        self._write(e.text, newline=False)
        if e.text:
            self._mid_line = not e.text.endswith("\n")

    def _on_tool_call(self, line: Line, e: ToolCalled) -> None:
        worker = line.parent_id is not None
        shown = Text(f"  {line.agent_id} " if worker else "", style="dim")
        shown.append(f"[step {e.step}] ", style="dim")
        shown.append(e.name, style="cyan" if worker else "bold cyan")
        if e.label:
            shown.append(f" {e.label}", style="dim" if worker else "")
        shown.append(" → ", style="dim")
        shown.append(e.summary or "done", style="red" if e.is_error else "green")
        if (e.facts or {}).get("denied"):  # why, in its own words: the policy's reason
            why = (e.result_preview or "").split("\n", 1)[0]
            shown.append(f" · {why}", style="red")
        self._write(shown)
        if not e.is_error:
            for diff_line in _edit_preview(e, "  " if worker else ""):
                self._write(diff_line)

    def _on_delegate_start(self, _line: Line, e: DelegateStart) -> None:
        self._workers[e.child_id] = _Worker(e.child_id, e.child_profile)
        task = " ".join(e.task.split())
        shown = Text(f"→ {e.child_id} ", style="bold")
        shown.append(e.child_profile, style="bold magenta")
        shown.append(f": {task if len(task) <= 100 else task[:99] + '…'}")
        self._write(shown)
        self._refresh_live()

    def _on_delegate_end(self, _line: Line, e: DelegateEnd) -> None:
        self._workers.pop(e.child_id, None)
        ok = e.status == "completed"
        shown = Text(
            f"{'✓' if ok else '✗'} {e.child_id} ", style="bold green" if ok else "bold red"
        )
        shown.append(e.child_profile, style="magenta")
        shown.append(
            f" {e.status} · {e.steps} steps · {e.tokens} tok · {self._cost(e.child_id)} · "
            f"{e.elapsed_s:.1f}s · {len(e.files_changed)} files changed"
        )
        if not ok:
            shown.append(f" · {e.reason}", style="red")
        self._write(shown)
        self._refresh_live()

    def _cost(self, agent: str) -> str:
        """What an agent's own model calls cost, as every view says it."""
        return dollars(cost_of(usage_of(self._calls.get(agent, [])), self.prices))

    def _on_verification(self, line: Line, e: Verification) -> None:
        if e.action == "sent_back":
            who = f"{line.agent_id} " if line.parent_id is not None else ""
            self._write(Text(f"  gaffer sent {who}back to work: {e.reason}", style="yellow"))

    def _on_check_chosen(self, _line: Line, e: CheckChosen) -> None:
        # Said once, when there is one: "unchecked" is the run's last line's to say, and
        # a chat's every turn would repeat the same choice.
        if e.command is not None and e.line != self._check_said:
            self._check_said = e.line
            self._write(Text(f"gaffer: {e.line}", style="dim"))

    _check_said = ""

    def _on_check(self, line: Line, e: CheckRan) -> None:
        if e.reused:
            return  # the same verdict as the line above it
        who = f"{line.agent_id}'s change" if line.parent_id is not None else "the change"
        style = {"verified": "green", "unchecked": "yellow"}.get(e.verdict, "red")
        self._write(Text(f"  gaffer checked {who}: {e.line}", style=style))

    def _on_fresh_attempt(self, line: Line, e: FreshAttempt) -> None:
        who = f"{line.agent_id}: " if line.parent_id is not None else ""
        what = f"drew the change afresh (sample {e.attempt}, temperature {e.temperature})"
        if e.made_from:
            what = f"joined samples {e.made_from[0]} and {e.made_from[1]}"
        self._write(
            Text(f"  {who}gaffer {what}: {e.reason}", style="green" if e.kept else "yellow")
        )

    def _on_llm_retry(self, line: Line, e: LlmRetry) -> None:
        self._write(
            Text(
                f"  {line.agent_id} [step {e.step}] model call failed (attempt "
                f"{e.attempt}: {e.error}); retrying in {e.wait_s:.1f}s",
                style="yellow",
            )
        )

    def _on_limit(self, line: Line, e: Limit) -> None:
        who = f"{line.agent_id} " if line.parent_id is not None else ""
        self._write(Text(f"{who}stopped: {e.limit} limit: {e.detail}", style="bold yellow"))

    def _on_llm_call(self, line: Line, e: LlmCall) -> None:
        self._answered(line.agent_id)
        if e.runaway:
            who = f"{line.agent_id}: " if line.parent_id is not None else ""
            said = f"the reply began repeating itself ({e.runaway}); gaffer ended it there"
            self._write(Text(f"  {who}{said}", style="yellow"))

    def _on_agent_end(self, line: Line, _e: AgentEnd) -> None:
        self._answered(line.agent_id)
        if line.parent_id is None and self._mid_line:
            self.console.print()
            self._mid_line = False

    def _on_extension(self, _line: Line, e: Extension) -> None:
        if e.status == "skipped":
            self._write(Text(f"gaffer: warning: {e.message}", style="yellow"))

    def _on_boundary(self, _line: Line, e: Boundary) -> None:
        self._write(Text(f"gaffer: {e.message}", style="yellow"))

    def _on_hook(self, _line: Line, e: HookRan) -> None:
        if e.decision == "failed":
            said = f"gaffer: the {e.hook} hook in {e.source}: {e.message}; the run goes on"
            self._write(Text(said, style="yellow"))

    def _on_session_end(self, _line: Line, _e: SessionEnd) -> None:
        self._workers.clear()
        self._in_flight.clear()
        self._refresh_live()


EDIT_PREVIEW_LINES = 3


def _edit_preview(call: ToolCalled, indent: str) -> list[Text]:
    """A few lines of what an edit changed, under its tool line."""
    args = call.args
    if not isinstance(args, dict):
        return []
    if call.name == "edit_file":
        old = str(args.get("old_text", "")).splitlines()
        new = str(args.get("new_text", "")).splitlines()
        shown = [Text(f"{indent}    - {line}", style="red") for line in old[:EDIT_PREVIEW_LINES]]
        shown += [Text(f"{indent}    + {line}", style="green") for line in new[:EDIT_PREVIEW_LINES]]
        if len(old) > EDIT_PREVIEW_LINES or len(new) > EDIT_PREVIEW_LINES:
            shown.append(Text(f"{indent}    …", style="dim"))
        return shown
    if call.name == "write_file":
        lines = str(args.get("content", "")).splitlines()
        return [Text(f"{indent}    + {len(lines)} lines written", style="green")]
    return []
