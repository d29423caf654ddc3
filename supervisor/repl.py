"""`gaffer` / `gaffer chat`: a multi-turn session with line editing, history and slash commands."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from supervisor import runlog
from supervisor.resume import rebuild
from supervisor.session import Session
from supervisor.view import profiles_table
from workers.outcome import Aborted, Failed, Finished, LimitHit, reason_of
from workers.snapshots import Store
from workers.tools.memory import project_instructions

HELP = """\
/help            this list
/stats           tokens, time and tool calls of this session
/log [n]         the last n lines of this session's log, as steps (default 20)
/model [name]    show the model, or switch to another for the next turns
/profiles        the worker profiles
/clear           forget the conversation (the log keeps it)
/compact         summarise older turns now to free context
/memory          what AGENT.md and AGENTS.md tell every agent
/resume [run]    continue the conversation of an earlier run (default: the last one)
/exit            leave (Ctrl-D works too); Ctrl-C cancels the current turn only"""


class Repl:
    def __init__(self, session: Session, console: Console) -> None:
        self.session = session
        self.console = console
        self.commands: dict[str, Callable[[str], None]] = {
            "help": lambda _arg: self._say(HELP),
            "stats": self._stats,
            "log": self._log,
            "model": self._model,
            "profiles": lambda _arg: self.console.print(
                profiles_table(self.session.plan.profiles, self.session.plan.tools)
            ),
            "clear": self._clear,
            "compact": self._compact,
            "memory": self._memory,
            "resume": self._resume,
        }

    def handle(self, line: str) -> bool:
        """Act on one line of input; False when the user wants to leave."""
        line = line.strip()
        if not line:
            return True
        if not line.startswith("/"):
            self._turn(line)
            return True
        name, _, arg = line[1:].partition(" ")
        if name in ("exit", "quit"):
            return False
        command = self.commands.get(name)
        if command is None:
            self._say(f"unknown command /{name}; /help lists them")
        else:
            command(arg.strip())
        return True

    def loop(self, read: Callable[[], str]) -> None:
        while True:
            try:
                line = read()
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt clears the line, as in a shell
            except EOFError:
                return
            if not self.handle(line):
                return

    def _turn(self, text: str) -> None:
        result = self.session.turn(text)
        match result.outcome:
            case Finished(answer=answer):
                # The text streamed already; what the gate added did not.
                stamp = answer.rsplit("\n\n", 1)[-1] if "\nVerification: " in answer else ""
                if stamp:
                    self._say(stamp)
            case LimitHit() | Failed():
                self._say(f"stopped: {reason_of(result.outcome)}")
            case Aborted():
                self._say("turn cancelled; the session goes on")

    def _say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    def _stats(self, _arg: str) -> None:
        for table in runlog.stats(runlog.read_records(self.session.log.path)):
            self.console.print(table)

    def _log(self, arg: str) -> None:
        count = int(arg) if arg.isdigit() else 20
        for line in runlog.render(runlog.read_records(self.session.log.path))[-count:]:
            self.console.print(line)

    def _model(self, arg: str) -> None:
        if arg:
            self.session.model_name = arg
        self._say(f"model: {self.session.plan.make_model(self.session.model_name).name}")

    def _clear(self, _arg: str) -> None:
        self.session.messages.clear()
        self.session.keeper.goal = ""
        self._say("conversation cleared")

    def _compact(self, _arg: str) -> None:
        before = len(self.session.messages)
        if self.session.compact():
            self._say(f"compacted: {before} messages → {len(self.session.messages)}")
        else:
            self._say("nothing old enough to compact yet")

    def _memory(self, _arg: str) -> None:
        self._say(
            project_instructions(self.session.workspace)
            or "no AGENT.md or AGENTS.md yet; the remember tool starts AGENT.md"
        )

    def _resume(self, arg: str) -> None:
        try:
            path = runlog.find_run(self.session.log_dir, arg or _previous_run(self.session))
            records = runlog.read_records(path)
        except (runlog.RunNotFound, runlog.RunUnreadable) as error:
            self._say(str(error))
            return
        rebuilt = rebuild(records, Store(self.session.workspace))
        self.session.messages[:] = rebuilt.messages
        self.session.keeper.goal = rebuilt.task
        self._say(
            f"resumed {path.stem}: {len(rebuilt.messages)} messages; task was: {rebuilt.task}"
        )
        for worker in rebuilt.interrupted_workers:
            self._say(f"  interrupted worker (not replayed): {worker}")


def _previous_run(session: Session) -> str:
    runs = [p.stem for p in sorted(session.log_dir.glob("*.jsonl")) if p.stem != session.session_id]
    if not runs:
        raise runlog.RunNotFound(f"no earlier runs in {session.log_dir}")
    return runs[-1]


def line_reader(history: Path) -> Callable[[], str]:
    """prompt_toolkit with history on a terminal; plain lines from a pipe."""
    if not os.isatty(0):

        def read_plain() -> str:
            line = input()
            return line

        return read_plain
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    history.parent.mkdir(parents=True, exist_ok=True)
    prompt: PromptSession[str] = PromptSession(history=FileHistory(str(history)))
    return lambda: prompt.prompt("gaffer> ")
