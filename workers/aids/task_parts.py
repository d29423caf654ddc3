"""The parts of a task, handed out for an agent that works through workers.

A small model that leads through `delegate` alone splits the job by what it sees, not by
what was asked. Given the demo's survey ("what each top-level folder is for, where the
agent loop lives, how a worker is sandboxed"), the bundled 1.5B model sent one explorer
per folder it had noticed and none to the loop. Told the parts one line each, it still
rewrote them: "how a worker is sandboxed" went out as "Report the Dockerfile", and that
explorer looked for one where none is. Its first reply also cost a minute.

The task's own shape says where its parts are: numbered items, several questions, or a
list of clauses after a colon (a list of bare names, "defined: A, B and C", makes a part
of the question for each). When a question has two or more and the agent may delegate
to a reader, its parts go to as many readers as the server can serve at once, in the
task's own words, in one delegate call made for the agent before its first reply; the
reports are its to check and answer from. On the bundled model's one slot that is one
reader with every part: a second would only wait for the first, and start cold. A task
that asks for a change is only told its parts: which worker edits what is the agent's
call. A task with one part is told nothing.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

from workers import numbered
from workers.aids.focused_write import asks_for_change
from workers.aids.joined_reports import CHECK_EACH_LINE, FIRST_ANSWER_HEADING, joined_answer
from workers.guards.named_code import named_paths
from workers.hooks import REPORTED, Aid, Finish, View
from workers.limits import JOINING_TIME_SHARE, WORKER_TIME_SHARE
from workers.model import ModelError, ToolCall
from workers.repo_map.search import Found
from workers.report_lines import same_file

Find = Callable[[str, int], list[Found]]
"""The files a question's words find best, at most so many (RunMap.best)."""

MAX_PARTS = 12
MIN_WORDS = 2
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSES = re.compile(
    r"\s*(?:;|,\s*(?:and\s+)?|\band\s+(?=(?:what|where|which|how|why|who|when)\b))"
)

# Each reader sees its part, and the whole task only as where the part comes from.
PART = (
    "{part}\n\nThis is one part of a larger task, and other workers have the others: "
    "answer only this part, in at most a sentence or two and in the form the whole task "
    "asks for, naming the files and folders that show it. The whole task was: {task}"
)
PARTS = (
    "{parts}\n\nThese are parts of a larger task, and other workers may have others: "
    "answer each of these, numbered as here, each in at most a sentence or two and in the "
    "form the whole task asks for, naming the files and folders that show it. The whole "
    "task was: {task}"
)
# For a model that cannot read much in its time (one whose readers' answers are joined),
# a first answer goes with each part for its reader to check. Each part is asked on its
# own, tools off, with the few files the map's search finds for its words (what each
# defines and says it is), and the model picks one: on the bench's survey and two held-out
# packages the bundled model so picks 44 of 56 files in about 15 s a package, where it
# answered 33 from the whole map asked at once, its lines drifting from their questions.
# A small model's pick leans on where a file is in the list: asked again with the list
# reversed, it names another file for 8 of those 56. So each part is asked in both
# orders, and where the two picks differ the search's first stands: 44 → 46 of the 56,
# and 10 → 12 of 18 on two packages whose questions were written after this was built
# (trio, _pytest), for a second short call a part.
DRAFT_ASK = (
    "The files whose definitions have this question's words, with what each says it "
    "is:\n{found}\n\nQuestion: {part}\nAnswer with the path of the one file that answers "
    "it, and nothing else."
)
DRAFT_FILES = 3
"""Files the model chooses among for each part."""
# Told only "check each line with a call (find_symbol, grep or read_file)", the bundled
# model called each line's file as if it were a tool (`core.py` with no arguments), one
# call a line, until the repetition guard stopped it with no answer.
DRAFTED = (
    "\n\n" + FIRST_ANSWER_HEADING + "\n{lines}\n" + CHECK_EACH_LINE + ": "
    "find_symbol with the name in brackets says where it is defined ({example} for the "
    "first line), and read_file or grep what it does; where the code shows otherwise, "
    "answer what it shows."
)
_DRAFTED_SYMBOL = re.compile(r"\((\w+) ([^()\s]+)\)$")
DRAFT_TOKENS = 40
DRAFT_SHARE = 0.25
"""The most of its time left the first answer may take: the rest is the readers'."""
DRAFT_MIN_SECONDS = 240
"""The least time left for a first answer to be worth asking: on the bundled model on
two cores it costs two short calls a part (about 1.5 s each), and the reader's own first
call takes 60 to 90 s; with less, the reader's time is worth more (the demo's 150 s run,
the reader given what was left after a first answer from the whole map, ended with
none)."""
TOLD = (
    "Your task has {count} parts. Hand them all out in one delegate call with `tasks`, "
    "one self-contained task per part (say what to find and what to report):\n{parts}"
)


def parts_of(task: str) -> list[str]:
    """The task's parts in its own words, or [] when it has fewer than two, or when they
    cannot all be handed out (more than MAX_PARTS, or one a single word, a heading more
    than a question): a part left out would go unanswered in an answer told to be whole."""
    for found in (_numbered(task), _questions(task), _named(task), _clauses(task)):
        if len(found) < 2:
            continue
        whole = len(found) <= MAX_PARTS and all(len(p.split()) >= MIN_WORDS for p in found)
        return found if whole else []
    return []


def _named(task: str) -> list[str]:
    """A list of bare names after the colon ("In which file is each of these defined: A,
    B and C? Give the file for each."): the question asked of each."""
    head, colon, rest = task.partition(":")
    listed = re.split(r"(?<=[.!?])\s", rest.strip(), maxsplit=1)[0]
    names = [n.strip(" .?!") for n in _NAMES_SPLIT.split(listed) if n.strip(" .?!")]
    question = re.split(r"(?<=[.!?])\s+", head.strip())[-1]
    asked = listed.endswith("?") or _QUESTION.match(question)
    if not colon or "\n" in head or not asked or not all(_NAME.fullmatch(n) for n in names):
        return []  # "I tried this: foo and bar" lists what was tried, not what is asked
    ending = "?" if listed.endswith("?") else ""
    return [f"{question}: {name.strip('`').removesuffix('()')}{ending}" for name in names]


# Not "or": "Which is faster: json.loads or orjson.loads?" is one question about both.
_NAMES_SPLIT = re.compile(r"\s*,\s*(?:and\s+)?|\s+and\s+")
_QUESTION = re.compile(r"(?:in\s+)?(?:which|where|what|how|who|when|why)\b", re.IGNORECASE)
_NAME = re.compile(r"`?[A-Za-z_][\w.]*(?:\(\))?`?")


def _numbered(task: str) -> list[str]:
    return numbered.items(task, bullets=True)


def _questions(task: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(task) if s.strip().endswith("?")]


def _clauses(task: str) -> list[str]:
    """The clauses listed after the task's first colon ("Survey X: a, b, and c")."""
    head, colon, rest = task.partition(":")
    if asks_for_change(task):
        return []  # "Fix X: it crashes, and keep the API" is one change, not two jobs
    if not colon or "\n" in head or re.search(r"[.!?]\s+\S", rest.strip()):
        return []  # a list is one sentence after its colon, not the rest of the task
    return [c.strip(" .") for c in _CLAUSES.split(rest.strip()) if c.strip(" .")]


def handed_out_whole(task: str) -> bool:
    """Whether an agent that looks through readers hands this task's parts out and, with
    `joins`, gives their answers joined as its own: it writes no answer after them."""
    return bool(parts_of(task)) and not asks_for_change(task)


def workers_share(joins: bool, task: str) -> float:
    """Of an agent's time left, what its workers may use: nearly all of it when it looks
    through readers and gives their answers joined as its own, as it writes none after."""
    return JOINING_TIME_SHARE if joins and handed_out_whole(task) else WORKER_TIME_SHARE


class TaskParts(Aid):
    """`reader`: the profile a question's parts go to, one worker each; None (no reader
    may be delegated to) tells the parts instead. `joins`: the workers' answers, joined,
    are the agent's (workers/aids/joined_reports.py), for a model that would only write
    them out again."""

    def __init__(
        self,
        reader: str | None = None,
        at_once: int = 4,
        *,
        joins: bool = False,
        find: Find | None = None,
    ) -> None:
        self.reader = reader
        self.at_once = max(1, at_once)
        """Readers the server serves at once: the parts go to no more than this many."""
        self.joins = joins
        self.find = find
        """The repo map's search (RunMap.best): where a joining agent's first answer
        comes from."""

    def before_first_step(self, view: View) -> Finish | None:
        task = view.latest_request
        if view.looked or not (parts := parts_of(task)):
            return None
        if self.reader is None or not handed_out_whole(task):
            lines = "\n".join(f"{n}. {part}" for n, part in enumerate(parts, 1))
            view.tell(TOLD.format(count=len(parts), parts=lines), source="task_parts")
            return None
        whole = " ".join(task.split())
        groups = grouped(parts, self.at_once)
        drafted = self._drafted(view, task, parts)
        arguments = {"profile": self.reader, "tasks": handed_out(groups, whole, drafted)}
        call = ToolCall(id="task-parts", name="delegate", arguments=json.dumps(arguments))
        result = view.run(call, arguments, checked=False)
        view.tell(f"{REPORTED}\n\n{result.output}", source="task_parts")
        reports = result.parts or (result.output,)
        if self.joins and (joined := joined_answer(groups, reports, drafted)):
            return Finish(joined.answer, made_of_checked=True, left_out=joined.left_out)
        return None

    def _drafted(self, view: View, task: str, parts: list[str]) -> dict[int, str]:
        """The first answer, by part number: for each part, the file the model chose
        among those the search found for it, in their order and reversed (_agreed), with
        the definition that has its words; none for a part the search found nothing
        for, or where the model named another file (a guess). {} where there is no
        search, or too little time."""
        left = view.seconds_left
        if not (self.joins and self.find) or (left is not None and left < DRAFT_MIN_SECONDS):
            return {}
        until = None if left is None else time.monotonic() + DRAFT_SHARE * left
        drafted: dict[int, str] = {}
        for number, part in enumerate(parts, 1):
            if not (found := self.find(part, DRAFT_FILES)):
                continue
            picks: list[Found | None] = []
            for shown in (found, found[::-1])[: min(2, len(found))]:
                seconds = None if until is None else until - time.monotonic()
                if seconds is not None and seconds <= 0:
                    break
                listed = "\n".join(f"- {f.path}: {f.symbol.described()}" for f in shown)
                ask = DRAFT_ASK.format(found=listed, part=" ".join(part.split()))
                try:
                    turn = view.ask_aside(ask, max_tokens=DRAFT_TOKENS, seconds=seconds)
                except ModelError:  # a call that failed or ran out of time: so would the next
                    break
                named = named_paths(turn.text, None)
                picks.append(
                    next((f for f in found if named and same_file(named[0], f.path)), None)
                )
            if (chosen := _agreed(picks, found)) is not None:
                symbol = chosen.symbol
                drafted[number] = f"{number}. {chosen.path} ({symbol.kind} {symbol.name})"
            if len(picks) < min(2, len(found)):
                break  # out of time, or the model failed
        return drafted


def _agreed(picks: list[Found | None], found: list[Found]) -> Found | None:
    """The file the model picked in every order it was asked in; the search's first where
    its picks differ (the list's order chose, not the question); None where it named no
    file of the list at all (a guess)."""
    named = [pick for pick in picks if pick is not None]
    if not named:
        return None
    if len(named) == len(picks) and all(pick.path == named[0].path for pick in named):
        return named[0]
    return found[0]


def grouped(parts: list[str], at_once: int) -> list[list[str]]:
    """The parts in turn, one worker each while there are readers to spare, else as many
    in a row to each of `at_once` workers."""
    groups: list[list[str]] = [[] for _ in range(min(max(1, at_once), len(parts)))]
    for number, part in enumerate(parts):
        groups[number * len(groups) // len(parts)].append(part)
    return groups


def handed_out(
    groups: list[list[str]], task: str, drafted: dict[int, str] | None = None
) -> list[str]:
    """The workers' tasks, one for each group of parts, numbered as in the whole, each
    with the first answer's lines for its parts where there is one."""
    tasks, first = [], 1
    for group in groups:
        listed = "\n".join(f"{n}. {p}" for n, p in enumerate(group, first))
        handed = (
            PART.format(part=group[0], task=task)
            if len(group) == 1
            else PARTS.format(parts=listed, task=task)
        )
        numbers = range(first, first + len(group))
        if lines := [drafted[n] for n in numbers if drafted and n in drafted]:
            handed += DRAFTED.format(lines="\n".join(lines), example=_checking(lines[0]))
        tasks.append(handed)
        first += len(group)
    return tasks


def _checking(line: str) -> str:
    """The call that checks a first answer's line ("3. core.py (class Context)"), as JSON."""
    found = _DRAFTED_SYMBOL.search(line)
    name = found.group(2).rpartition(".")[2] if found else line
    return json.dumps({"name": "find_symbol", "arguments": {"name": name}})
