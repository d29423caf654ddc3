"""`gaffer` / `gaffer chat`: a multi-turn session with line editing, history and slash commands."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from supervisor import run_stats, runlog
from supervisor.delegation import Team
from supervisor.exits import TERMINATED
from supervisor.resume import rebuild_chain
from supervisor.run_changes import NoChanges, RunChanges, changes_of_run
from supervisor.session import Session
from supervisor.tables import profiles_table
from workers.changes.snapshots import Store
from workers.log.reader import events_of
from workers.log.schema import UserMessage
from workers.outcome import Aborted, Failed, Finished, LimitHit, reason_of
from workers.permissions.modes import MODES
from workers.tools.memory import project_instructions

HELP = """\
/help            this list
/stats           tokens, time and tool calls of this session
/cost            what this session's model calls cost so far, in dollars, per agent
/log [n]         the last n lines of this session's log, as steps (default 20)
/model [name]    show the model, or switch to another for the next turns
/profiles        the worker profiles
/clear           forget the conversation (the log keeps it)
/compact         summarise older turns now to free context
/memory          what AGENT.md and AGENTS.md tell every agent
/diff            what this session changed, as a unified diff (undone parts marked)
/undo [all]      put back the last turn's changes (all: every turn's), file by file
/redo            take the last undo back, for each file still as the undo left it
/resume [run]    continue the conversation of an earlier run (`last`); alone, lists recent runs
/step [all|off]  ask before each tool call of the top agent (all: of workers too); off stops asking
/mode [name]     show or switch the approval mode: ask-edits, plan, auto, full-auto
!command         run a command on the host, in the workspace (outside the read-only allowlist
                 it asks first, as for an agent); its output goes into the conversation
/exit            leave (Ctrl-D, or Ctrl-C twice at an empty prompt); Ctrl-C cancels a turn"""
# Two Ctrl-C at the prompt this close together leave, as in Claude Code and a Python shell.
DOUBLE_CTRL_C_S = 2.0


class Repl:
    def __init__(self, session: Session, console: Console, *, quiet: bool = False) -> None:
        self.session = session
        self.console = console
        self.quiet = quiet
        """No view streams the turns (`--quiet`): each answer is printed whole."""
        self.commands: dict[str, Callable[[str], None]] = {
            "help": lambda _arg: self._say(HELP),
            "stats": self._stats,
            "cost": self._cost,
            "log": self._log,
            "model": self._model,
            "profiles": lambda _arg: self.console.print(
                profiles_table(
                    self.session.plan.profiles,
                    self.session.plan.tools,
                    self.session.plan.make_model(None).name,
                )
            ),
            "clear": self._clear,
            "compact": self._compact,
            "memory": self._memory,
            "diff": self._diff,
            "undo": self._undo,
            "redo": self._redo,
            "resume": self._resume,
            "step": self._step,
            "mode": self._mode,
        }

    def handle(self, line: str) -> bool:
        """Act on one line of input; False when the user wants to leave."""
        line = line.strip()
        if not line:
            return True
        if line.startswith("!"):
            self._host_command(line[1:].strip())
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

    def _mode(self, arg: str) -> None:
        permissions = self.session.plan.permissions
        assert permissions is not None  # the session made them when it started
        if arg and arg not in MODES:
            self._say(f"no mode {arg!r}; the modes are {', '.join(MODES)}")
            return
        permissions.mode = arg or permissions.mode
        plan = " (edits and commands are refused until you switch back)" * (arg == "plan")
        self._say(f"mode: {permissions.mode}{plan}")

    def _step(self, arg: str) -> None:
        team: Team | None = getattr(self.session, "team", None)
        if team is None:
            self._say("step mode starts with the first turn; say /step again then")
            return
        if arg not in ("", "all", "off"):
            self._say("/step, /step all or /step off")
            return
        if arg == "off":
            team.plan.stepper, team.plan.step_workers = None, False
            self._say("step mode off: tool calls run without asking")
            return
        from supervisor.step_mode import TerminalStepper

        team.plan.stepper = TerminalStepper(
            self.console, stop=self.session.cancel, pause=self.session.paused
        )
        team.plan.step_workers = arg == "all"
        whose = "every agent's" if arg == "all" else "the top agent's"
        self._say(f"step mode on: you decide each of {whose} tool calls before it runs")

    def loop(self, read: Callable[[], str]) -> None:
        last_ctrl_c = float("-inf")
        while True:
            try:
                line = read()
            except KeyboardInterrupt:  # clears the line, as in a shell; twice leaves
                if TERMINATED.is_set() or time.monotonic() - last_ctrl_c < DOUBLE_CTRL_C_S:
                    return
                last_ctrl_c = time.monotonic()
                self._say("(Ctrl-C again to leave)")
                continue
            except EOFError:
                return
            if not self.handle(line) or TERMINATED.is_set():  # SIGTERM ends the chat
                return

    def _turn(self, text: str) -> None:
        result = self.session.turn(text)
        match result.outcome:
            case Finished(answer=answer) if self.quiet:
                self._say(answer)
            case Finished(answer=answer):
                # The text streamed already; what the gate added did not.
                stamped = "\nVerification: " in answer or "\nCheck: " in answer
                stamp = answer.rsplit("\n\n", 1)[-1] if stamped else ""
                if stamp:
                    self._say(stamp)
            case LimitHit() | Failed():
                self._say(f"stopped: {reason_of(result.outcome)}")
            case Aborted():
                self._say("turn cancelled; the session goes on")

    def _say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    def _stats(self, _arg: str) -> None:
        records = runlog.read_records(self.session.log.path)
        turns = len(events_of(records, UserMessage))
        self._say(f"this session: in progress · {turns} turn{'' if turns == 1 else 's'} so far")
        for table in run_stats.stats(records, live=True, prices=self.session.plan.prices):
            self.console.print(table)

    def _cost(self, _arg: str) -> None:
        from supervisor.costs import cost_by_agent, dollars, run_cost

        records = runlog.read_records(self.session.log.path)
        prices = self.session.plan.prices
        self._say(f"this session so far: {dollars(run_cost(records, prices))}")
        for agent, cost in cost_by_agent(records, prices).items():
            self._say(f"  {agent}: {dollars(cost)}")

    def _log(self, arg: str) -> None:
        count = int(arg) if arg.isdigit() else 20
        for line in runlog.render(runlog.read_records(self.session.log.path))[-count:]:
            self.console.print(line)

    def _model(self, arg: str) -> None:
        if arg:
            current = self.session.plan.make_model(self.session.model_name)
            offered = getattr(current, "available_models", lambda: None)()
            if offered is not None and arg not in offered:
                # Some endpoints take names they do not list (aliases, deployments): a warning.
                shown = ", ".join(sorted(offered)[:12]) + (", …" if len(offered) > 12 else "")
                self._say(f"warning: the endpoint does not list {arg!r}; it lists: {shown}")
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

    def _diff(self, _arg: str) -> None:
        from supervisor import history
        from supervisor.terminal import visible

        try:
            text, notes = history.diff_text(self._changes())
        except NoChanges as error:
            self._say(str(error))
            return
        for note in notes:
            self._say(note)
        for line in text.splitlines() or ["nothing changed yet"]:
            # What a file holds is shown, never sent to the terminal as control codes.
            shown = Text(visible(line), style=history.diff_style(line) or "")
            self.console.print(shown, highlight=False)

    def _undo(self, arg: str) -> None:
        from supervisor import history

        if arg not in ("", "all"):
            self._say("/undo (the last turn's changes) or /undo all (every turn's)")
            return
        try:
            run = self._changes()
            if arg != "all":  # the last turn that has changes not undone yet
                done = history.undone_so_far(run)
                turn = max((f.turn for f in run.chosen if f.key not in done), default=None)
                run.chosen[:] = [f for f in run.chosen if f.turn == turn] or run.chosen
            said = history.put_back(run)
        except NoChanges as error:
            said = [str(error)]
        else:
            self._tell_model("took back your changes with /undo", said)
        for line in said:
            self._say(line)

    def _redo(self, _arg: str) -> None:
        from supervisor import history

        try:
            run = self._changes()
            undo_id, files, refused = history.plan_redo(run)
            said = history.apply_redo(run, undo_id, files) if files else []
        except NoChanges as error:
            said, refused = [str(error)], []
        else:
            self._tell_model("put your changes back with /redo", said)
        for line in [*said, *(f"not redone: {r}" for r in refused)]:
            self._say(line)

    def _host_command(self, command: str) -> None:
        """`!cmd`: the user's own command, run on the host in the workspace under the
        policy an agent's is (outside the read-only allowlist, the approval prompt asks);
        its output is shown and goes into the conversation, as Claude Code's `!` does."""
        from supervisor.terminal import visible
        from workers.tools.base import ToolContext, ToolError
        from workers.tools.shell import RunShellArgs, run_shell

        if not command:
            self._say("!COMMAND runs COMMAND on the host, in the workspace")
            return
        context = ToolContext(self.session.workspace, approve=self.session.plan.approve)
        try:
            result = run_shell(context, RunShellArgs(command=command))
        except ToolError as error:
            self._say(str(error))
            return
        self.console.print(Text(visible(result.output)), highlight=False)
        self.session.tell_model(
            f"[the user ran this on the host: `{command}`]\n{result.output}", source="user_command"
        )

    def _tell_model(self, what: str, said: list[str]) -> None:
        """The model's conversation says it, or its history still says the work is done."""
        done = [line for line in said if line.startswith(("undone: ", "redone: "))]
        if done:
            self.session.tell_model(
                f"[gaffer: the user {what}: {'; '.join(done)}. The files are as that says; "
                "read them again before you rely on what you wrote.]",
                source="undo",
            )

    def _changes(self) -> RunChanges:
        log = self.session.log.path
        if not log.exists() or log.stat().st_size == 0:
            raise NoChanges("nothing changed yet: no turn has run")
        return changes_of_run(log, self.session.workspace)

    def _resume(self, arg: str) -> None:
        if not arg:
            self._list_recent_runs()
            return
        try:
            ref = _previous_run(self.session) if arg == "last" else arg
            path = runlog.find_run(
                self.session.log_dir, ref, exclude=self.session.session_id, to_resume=True
            )
            rebuilt = rebuild_chain(path, Store(self.session.workspace))
        except (runlog.RunNotFound, runlog.RunUnreadable) as error:
            self._say(str(error))
            return
        self.session.messages[:] = rebuilt.messages
        self.session.keeper.goal = rebuilt.task
        self._say(
            f"resumed {path.stem}: {len(rebuilt.messages)} messages; task was: {rebuilt.task}"
        )
        for worker in rebuilt.interrupted_workers:
            self._say(f"  interrupted worker (not replayed): {worker}")

    def _list_recent_runs(self) -> None:
        runs = _recent_runs(self.session)
        if not runs:
            self._say(f"no earlier runs in {self.session.log_dir}")
            return
        self._say("recent runs (/resume ID, or /resume last):")
        for run in reversed(runs):
            task = run.task if len(run.task) <= 60 else run.task[:59] + "…"
            self._say(f"  {run.run_id}  {run.status:<11} {task}")


RECENT_RUNS = 8


def _recent_runs(session: Session) -> list[runlog.RunSummary]:
    if not session.log_dir.is_dir():
        return []
    runs = [r for r in runlog.list_runs(session.log_dir) if r.run_id != session.session_id]
    return runs[-RECENT_RUNS:]


def _previous_run(session: Session) -> str:
    runs = [p.stem for p in sorted(session.log_dir.glob("*.jsonl")) if p.stem != session.session_id]
    if not runs:
        raise runlog.RunNotFound(f"no earlier runs in {session.log_dir}")
    return runs[-1]


def line_reader(history: Path, completer: Any = None) -> Callable[[], str]:
    """prompt_toolkit with history (and Tab completion: `completer`) on a terminal; plain
    lines from a pipe."""
    if not os.isatty(0):

        def read_plain() -> str:
            line = input()
            return line

        return read_plain
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    history.parent.mkdir(parents=True, exist_ok=True)
    prompt: PromptSession[str] = PromptSession(
        history=FileHistory(str(history)), completer=completer, complete_while_typing=False
    )
    return lambda: prompt.prompt("gaffer> ")


def completer_for(repl: Repl) -> Any:
    """Tab completes a /command at the start of a line, and a path in the workspace
    anywhere else (after `!`, or in a message: "look at work<Tab>")."""
    from prompt_toolkit.completion import Completer, Completion, PathCompleter
    from prompt_toolkit.document import Document

    names = sorted([*repl.commands, "exit", "quit"])
    workspace = str(repl.session.workspace)
    paths = PathCompleter(get_paths=lambda: [workspace], expanduser=False)

    class ChatCompleter(Completer):
        def get_completions(self, document: Document, complete_event: Any) -> Any:
            text = document.text_before_cursor
            if text.startswith("/") and " " not in text:
                for name in names:
                    if f"/{name}".startswith(text):
                        yield Completion(f"/{name}", start_position=-len(text))
                return
            word = document.get_word_before_cursor(WORD=True).lstrip("!")
            yield from paths.get_completions(Document(word, len(word)), complete_event)

    return ChatCompleter()
