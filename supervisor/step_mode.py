"""Step mode at the terminal (`gaffer run --step`, `/step` in the chat): before tool calls
run, the user sees them and answers: run them, skip some (the model is told), edit one's
arguments, or stop the run.

Workers that run in parallel (`--step=all`) pause together: the first to reach its
calls waits a moment for the others, and all their calls are shown and decided as one
batch; the rest wait while the user answers, and nothing else is printed meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.console import Console

from workers.model import ToolCall
from workers.stepping import Decision, StoppedByUser

if TYPE_CHECKING:
    from supervisor.session import Session
    from supervisor.view import TerminalView

# How long the first of several parallel workers waits for the others' calls, so one
# batch is shown instead of one prompt per worker.
GATHER_S = 0.4
TOP_AGENT = "supervisor"
HELP = (
    "  enter or r: run them all · s: skip them all · s 2 3: skip those · "
    "e 2: edit call 2's arguments · q: stop the run"
)


@dataclass
class _Ask:
    agent_id: str
    calls: list[ToolCall]
    decisions: list[Decision] = field(default_factory=list)
    stopped: bool = False
    done: bool = False


class TerminalStepper:
    def __init__(
        self,
        console: Console,
        *,
        stop: Callable[[], None],
        read: Callable[[str], str] | None = None,
        pause: Callable[[], AbstractContextManager[object]] | None = None,
    ) -> None:
        self.console = console
        self.stop = stop
        """Cancels the whole run (its root budget): every agent ends at its next step."""
        self.read = read or self._read_line
        self.pause = pause or contextlib.nullcontext
        """Holds the terminal view still while the user answers."""
        self._asking = threading.Lock()
        self._mutex = threading.Lock()
        self._waiting: list[_Ask] = []

    def _read_line(self, prompt: str) -> str:
        """A line from stdin, the prompt on stderr: stdout is the answer's alone."""
        self.console.print(prompt, end="", markup=False, highlight=False)
        self.console.file.flush()
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")

    def decide(self, agent_id: str, calls: list[ToolCall]) -> list[Decision]:
        mine = _Ask(agent_id, calls)
        with self._mutex:
            self._waiting.append(mine)
        with self._asking:
            if not mine.done:
                if agent_id != TOP_AGENT:
                    time.sleep(GATHER_S)  # the other parallel workers' calls join this batch
                with self._mutex:
                    batch, self._waiting = self._waiting, []
                try:
                    self._ask(batch)
                except BaseException:  # Ctrl-C at the prompt: nobody's calls run unasked
                    self.stop()
                    for ask in batch:
                        ask.stopped = ask.done = True
                    raise
        if mine.stopped:
            raise StoppedByUser("stopped by the user at a step")
        return mine.decisions

    def _ask(self, batch: list[_Ask]) -> None:
        numbered = [(ask, n) for ask in batch for n in range(len(ask.calls))]
        skip: set[int] = set()
        edited: dict[int, str] = {}
        with self.pause():
            while True:
                self._show(numbered, skip, edited)
                try:
                    answer = self.read("  run? [r]/s/s N…/e N/q: ").strip().lower()
                except EOFError:
                    answer = "q"
                words = answer.split()
                if not words or words == ["r"]:
                    break
                if words == ["q"]:
                    self.stop()
                    for ask in batch:
                        ask.stopped = ask.done = True
                    return
                if words == ["s"]:
                    skip = set(range(1, len(numbered) + 1))
                    break
                picked = [int(w) for w in words[1:] if w.isdigit()]
                if not picked or any(not 1 <= p <= len(numbered) for p in picked):
                    self.console.print(HELP, markup=False, highlight=False)
                    continue
                if words[0] == "s":
                    skip.update(picked)
                    break
                if words[0] == "e" and len(picked) == 1:
                    self._edit(numbered, picked[0], edited)
                    continue
                self.console.print(HELP, markup=False, highlight=False)
        for number, (ask, _) in enumerate(numbered, 1):
            decision = Decision("skip") if number in skip else Decision("run", edited.get(number))
            ask.decisions.append(decision)
        for ask in batch:
            ask.done = True

    def _show(
        self, numbered: list[tuple[_Ask, int]], skip: set[int], edited: dict[int, str]
    ) -> None:
        agents = sorted({ask.agent_id for ask, _ in numbered})
        self.console.print(
            f"step · {', '.join(agents)} {'wants' if len(agents) == 1 else 'want'} to run:",
            markup=False,
            highlight=False,
        )
        for number, (ask, n) in enumerate(numbered, 1):
            call = ask.calls[n]
            arguments = edited.get(number, call.arguments)
            mark = " (skip)" if number in skip else " (edited)" if number in edited else ""
            shown = arguments if len(arguments) <= 300 else arguments[:299] + "…"
            self.console.print(
                f"  [{number}] {ask.agent_id} {call.name} {shown}{mark}",
                markup=False,
                highlight=False,
            )

    def _edit(self, numbered: list[tuple[_Ask, int]], number: int, edited: dict[int, str]) -> None:
        ask, n = numbered[number - 1]
        while True:
            try:
                text = self.read(f"  new arguments for [{number}] {ask.calls[n].name} (JSON): ")
            except EOFError:
                return
            try:
                value = json.loads(text)
            except json.JSONDecodeError as error:
                self.console.print(f"  not JSON ({error.msg}); again, or enter to keep them")
                if not text.strip():
                    return
                continue
            if not isinstance(value, dict):
                self.console.print("  the arguments are one JSON object, {…}; again")
                continue
            edited[number] = json.dumps(value)
            return


def for_run(view: TerminalView | None, session: Session) -> TerminalStepper:
    """`gaffer run --step`'s stepper: at the view's console, holding the view still."""
    from supervisor.view import stderr_console

    return TerminalStepper(
        view.console if view is not None else stderr_console(),
        stop=session.cancel,
        pause=view.paused if view is not None else None,
    )
