"""The loop's seam: the moments an aid may step in, and all it may see there.

The loop (workers/loop.py) knows no aid by name. It calls an agent's aids, in the order
assembly gave them, at five moments:

- `before_first_step`: before the first model call of a run (the task's files are read
  for the agent). An aid may `Finish` the run there, with an answer made of what the
  calls it made found (the workers' answers to a question's parts);
- `after_reply`: once a reply is in the conversation and before its calls run. What the
  reply holds besides its calls is acted on (file blocks become write_file calls); a
  `Note` is told to the agent after the reply's calls;
- `after_calls`: once a reply's calls (and its blocks) have their results, and what an
  aid had to say about them is told. An aid may act as the agent on what they did (run
  the tests the task names after a write) and tell it what came of it;
- `answer_next`: once calls have their results: a reply's, or those an aid made before
  the first step. An aid may say the next reply is the agent's answer: tools are off for
  it, and the agent is asked (its `answer_now`) to answer every part of the task;
- `when_stuck`: the agent would stop (a reply with no call and nothing done), or the
  repetition guard paused it. An aid may `Resume` it (it has told the agent what to do
  next, and the next reply must be a call) or `Finish` the run with an answer; None
  leaves the agent to the loop (its answer goes to the gate, or it is told to answer).

An aid sees the agent through a `View` only: it can ask the model aside, run a tool as
the agent, tell the agent something, read its evidence and its files, see whether the
budget is spent, say its last reply was a bad one (the next call is sampled away from
it), ask what the edit guard knows (the files seen, the last failure, a suite's deadline)
and what the change tracker saw (and take the agent's changes back), and checkpoint and
restore what its tries taught the guards. It never holds the Agent, its result, the
guards or the tracker, so an aid is tested with a fake view and no loop, and a new one
touches its own file and the assembly line that gives it. Counters live in the aids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from workers.facts import Facts
from workers.model import AssistantTurn, Message, ToolCall
from workers.tools.base import ToolResult

if TYPE_CHECKING:
    from workers.changes.change_sets import Change
    from workers.changes.snapshots import Tree
    from workers.guards.task_rules import KeptTests
    from workers.log.schema import Event

ATTACHED = "The files your task is about, read for you with read_file (do not repeat them):"
"""How the files read for an agent before its first step are told: it has looked."""
FOUND = "Found for you in the workspace before your first reply (do not look for it again):"
"""How what a reader's task words point to is told (the paths that hold them, or the top
level when none does): it has looked."""
REPORTED = "Your task's parts went to workers, one each, in one delegate call. Their reports:"
"""How workers' reports on a task's parts, handed out before its first step, are told:
it has looked, through them."""


def looked(messages: Sequence[Message]) -> bool:
    """Whether the conversation has tool results or attached files (in this run, or the
    one it resumes). The task itself never counts: a worker's task is a model's words,
    and one begun like gaffer's note would otherwise excuse it from looking."""
    task = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    return any(
        m.get("role") == "tool"
        or (i != task and str(m.get("content") or "").startswith((ATTACHED, FOUND, REPORTED)))
        for i, m in enumerate(messages)
    )


@dataclass(frozen=True)
class Note:
    """A message for the agent, told after the reply's calls have their results."""

    content: str
    source: str


@dataclass(frozen=True)
class Resume:
    """The agent goes on: the aid has told it what to do, and its next reply must be a call."""


@dataclass(frozen=True)
class Finish:
    """The run ends here with this answer (the gate still stamps it)."""

    answer: str
    made_of_checked: bool = False
    """The answer is made of what gaffer checked where it was said (workers' answers,
    each checked against that worker's own calls, less what that check denied): it is
    not judged again, and `left_out` says, as gaffer's, what was taken out."""
    left_out: tuple[str, ...] = ()


@dataclass(frozen=True)
class Checkpoint:
    """What an aid's tries may teach the agent's evidence and its edit guard, as it was."""

    facts: int
    last_failure: str
    untested_edit: bool


class FilesSeen(Protocol):
    """What an agent has seen of the workspace's files, and which it may not write: as
    file blocks are read against it."""

    @property
    def workspace(self) -> Path: ...

    @property
    def container_root(self) -> str | None:
        """Where the workspace is mounted in the agent's sandbox, if anywhere."""
        ...

    @property
    def seen(self) -> Mapping[str, str]:
        """Workspace-relative path → its fingerprint when the agent last saw it whole."""
        ...

    def keeps(self, path: object) -> str | None:
        """Why a write to `path` is refused (the task keeps it); None: it is not."""
        ...


class View(Protocol):
    """What an aid may see of the agent, and do as it."""

    step: int

    @property
    def task(self) -> str:
        """The first thing the agent was asked."""
        ...

    @property
    def latest_request(self) -> str:
        """The conversation's last message when it is the user's (what a run begins
        with), else ""."""
        ...

    @property
    def facts(self) -> Sequence[Facts]:
        """What each of its tool calls taught the harness, in order."""
        ...

    @property
    def looked(self) -> bool:
        """Whether the conversation already has tool results or attached files."""
        ...

    @property
    def room_for_files(self) -> int:
        """Characters the files shown to it at once may take."""
        ...

    @property
    def test_runners(self) -> tuple[str, ...]:
        """Test runners besides the known ones (workers/guards/test_runs.py)."""
        ...

    @property
    def check_command(self) -> str | None:
        """The run's check command (workers/check/), as the agent runs it in its own
        sandbox; else the test command its task names; None: neither."""
        ...

    def spent(self) -> bool:
        """Whether it must stop now: cancelled, or out of tokens or time."""
        ...

    @property
    def seconds_left(self) -> float | None:
        """Its time left; None: no deadline."""
        ...

    # What its edit guard knows (workers/guards/editing.py); an agent that edits nothing
    # has none, and these say nothing.

    def files_seen(self) -> FilesSeen | None:
        """The files it has seen whole, and the tests its task keeps; None when it edits
        nothing."""
        ...

    @property
    def last_failure(self) -> str:
        """Its last test run, when that failed: the command and where it failed."""
        ...

    @property
    def untested_edit(self) -> bool:
        """It changed a file and has not run the tests since."""
        ...

    @property
    def passing(self) -> bool:
        """Its last test run passed, and it has written nothing since."""
        ...

    def deadline(self, command: str) -> int | None:
        """Seconds a run of this test command may take, fitted to its suite; None:
        nothing known."""
        ...

    def full_output(self, result: ToolResult) -> str:
        """The whole output of a result that was cut for the model."""
        ...

    def saw(self, path: str, text: str = "") -> None:
        """It knows the file as it is now (shown to it, or written back as it was)."""
        ...

    def keep_tests(self, kept: KeptTests | None) -> None:
        """The tests its task keeps: writes to them are refused from now on."""
        ...

    @property
    def keeps_tests(self) -> bool:
        """Its task keeps tests (`keep_tests`)."""
        ...

    # What its calls changed in the workspace (workers/changes/tracker.py); None or
    # nothing for an agent whose changes are not tracked.

    @property
    def tracks_changes(self) -> bool: ...

    def original(self, path: str) -> bytes | None:
        """The file as it was when the agent began; None: it was not there, or unknown."""
        ...

    def mark(self) -> Tree:
        """The workspace now, once what changed since the agent's last call is its own:
        what gaffer writes for it from here is compared to this."""
        ...

    def since_start(self) -> list[Change]:
        """Everything the agent changed since it began."""
        ...

    def steps_taken(self) -> int:
        """How many of its calls have changed files so far."""
        ...

    def changes_since(self, steps: int) -> list[Change]:
        """What it changed after its first `steps` changing calls."""
        ...

    def changed_since(self, tree: Tree) -> list[Change]:
        """What differs in the workspace from `tree` (a `mark`)."""
        ...

    def undo(self, changes: Sequence[Change]) -> None:
        """These changes taken back in the workspace; raises CannotUndo."""
        ...

    def look(self) -> None:
        """The workspace as it is now is where its next call starts from."""
        ...

    def tell(self, content: str, *, source: str) -> None: ...

    def ask_aside(
        self,
        prompt: str,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: tuple[str, ...] = (),
        seconds: float | None = None,
    ) -> AssistantTurn:
        """One model call outside the conversation, tools off, at its own temperature,
        output cap, stop text and time bound when given, logged as an aside and counted
        in the agent's tokens. Raises ModelError."""
        ...

    def answer_with_tools_off(self, unanswered: str) -> str:
        """One more reply in the conversation, tools off: its text when it is prose,
        else "" (a call, or the model failed). A call it made anyway is answered
        `unanswered`."""
        ...

    def run(
        self,
        call: ToolCall,
        arguments: dict[str, Any],
        *,
        checked: bool = True,
        from_block: bool = False,
    ) -> ToolResult:
        """A tool call run, logged and counted as the agent's own, its facts in the
        evidence. `checked`: the repetition guard sees it, as it sees the agent's."""
        ...

    def read_in_sandbox(self, path: str, *, tool: str = "read_file") -> ToolResult:
        """The file read with the agent's own read_file in its sandbox, unlogged (or
        the folder listed, with tool="list_dir")."""
        ...

    def emit(self, event: Event) -> None: ...

    def reply_was_bad(self) -> None:
        """The last reply could not be acted on (blocks that do not parse): the next call
        is sampled away from it (workers/guards/replies.py)."""
        ...

    def checkpoint(self) -> Checkpoint: ...

    def restore(self, checkpoint: Checkpoint) -> None:
        """The evidence and the edit guard as they were at `checkpoint`."""
        ...


class Aid:
    """A small-model aid: each moment does nothing unless the aid says otherwise."""

    hidden_tools: frozenset[str] = frozenset()
    """Tools the agent may run but is not offered: the aid makes those calls for it."""
    hint: str = ""
    """How to make a change, added to the guards' refusals and pointers."""
    answer_now: str = ""
    """What a paused agent is asked for instead of an answer alone ({task} is the task)."""
    writes_while_paused: bool = False
    """An editor is paused like a reader: with tools off it can still change files."""

    def before_first_step(self, view: View) -> Finish | None:
        return None

    def after_reply(self, view: View, turn: AssistantTurn) -> Note | None:
        return None

    def after_calls(self, view: View) -> None:
        return None

    def answer_next(self, view: View) -> bool:
        return False

    def when_stuck(self, view: View, said: str) -> Resume | Finish | None:
        return None


class Aids:
    """An agent's aids, called in order: the first that resumes or finishes wins."""

    def __init__(self, aids: Sequence[Aid] = ()) -> None:
        self.each = tuple(aids)
        self.hidden_tools = frozenset().union(*(aid.hidden_tools for aid in self.each))
        self.hint = next((aid.hint for aid in self.each if aid.hint), "")
        self.answer_now = next((aid.answer_now for aid in self.each if aid.answer_now), "")
        self.writes_while_paused = any(aid.writes_while_paused for aid in self.each)

    def before_first_step(self, view: View) -> Finish | None:
        """Each aid's, in order; the first that finishes the run (with an answer made of
        what its calls found) ends it there."""
        for aid in self.each:
            if (finish := aid.before_first_step(view)) is not None:
                return finish
        return None

    def after_reply(self, view: View, turn: AssistantTurn) -> Note | None:
        notes = [note for aid in self.each if (note := aid.after_reply(view, turn))]
        if not notes:
            return None
        return Note("\n\n".join(n.content for n in notes), notes[0].source)

    def after_calls(self, view: View) -> None:
        for aid in self.each:
            aid.after_calls(view)

    def answer_next(self, view: View) -> bool:
        return any([aid.answer_next(view) for aid in self.each])  # each sees every batch

    def when_stuck(self, view: View, said: str) -> Resume | Finish | None:
        for aid in self.each:
            if (step_on := aid.when_stuck(view, said)) is not None:
                return step_on
        return None
