"""A reader's answer stands on what its own calls showed it, checked by the harness.

Every call's result is noted as it comes (the gate's `after_call`): the files it opened,
the files and folders a listing or a search showed, and what each search looked for and
whether it found anything. When the reader answers, each claim is checked against that:

- a file it names must have been opened, listed or matched by one of its calls, or be in
  the repo map it was shown;
- "X is in F" must agree with the map where the map knows X;
- "X is not there" needs a search for X that found nothing.

What fails is sent back (within the gate's send-backs); what is still unsupported when
they are spent goes on marked as such (UNSUPPORTED), never as fact.

An agent that looks through its workers stands on their reports alone: a file it names
must be in one (the map shows that a file exists, not what it does), and what a report
marks unsupported it may not repeat as fact.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from workers.guard_hooks import PendingCall
from workers.guards.named_code import named_paths, path_spans, written_as_code
from workers.repo_map.index import RepoMap
from workers.repo_map.symbols import SAYS
from workers.report_lines import read_report
from workers.report_lines import same_file as _same_file
from workers.tools.base import ToolResult

# Calls whose arguments say what was searched for, and which argument.
SEARCHES = {"grep": "pattern", "find_symbol": "name", "find_files": "pattern"}
# A search that found nothing says so in these words (grep, find_symbol, find_files).
_FOUND_NOTHING = re.compile(r"^(no matches|No definition of|no files match)", re.IGNORECASE)


def found_nothing(tool: str, output: str) -> bool:
    """A search (grep, find_files, find_symbol) that found nothing, by its tool's words."""
    return tool in SEARCHES and bool(_FOUND_NOTHING.match(output.strip()))


# A sentence that places a name in a file, and one that says a name is not there.
_PLACES = re.compile(
    r"\b(defined|declared|implemented|located|lives?|found|is in|are in|comes? from)\b"
    r"|^[\s*•\-\d.)]*`?[A-Za-z_][\w.]*`?(?:\(\))?\s*[:—–]",
    re.IGNORECASE,
)
_ABSENT = re.compile(
    r"\b(not found|no such|does not exist|doesn't exist|do not exist|is not in|isn't in|"
    r"not present|not defined|could not find|couldn't find|cannot find|can't find|nowhere)\b",
    re.IGNORECASE,
)
# A path followed by a kind and a name, as the map and find_symbol write a definition
# ("termui.py:347 class ProgressBar", "core.py (class Context)"): that name is placed there.
_KIND_AND_NAME = re.compile(
    r"[`'\"]?\s*[:(]?\s*(?:class|function|method|constant|interface|module|type|macro)"
    r"\s+`?([A-Za-z_][\w.]*)"
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_IDENTIFIER = re.compile(r"`([A-Za-z_][\w.]*)(?:\(\))?`|\b([A-Za-z_]\w*(?:\.\w+)*)\b")
UNSUPPORTED = "Unsupported (nothing this agent did shows it): "
"""How an answer's unsupported claims are said beside it."""
MAX_SHOWN = 4
"""Claims named in one send-back at most."""


def _without_summaries(tool: str, output: str) -> str:
    """find_symbol's lines without what a docstring says (after " — "): a path its words
    mention is no file the search found."""
    if tool != "find_symbol":
        return output
    return "\n".join(line.split(SAYS, 1)[0] for line in output.splitlines())


# A grep match ("a.py:12:text") and a file's count in an overview
# ("  a.py: 40"); find_symbol's definition of a name ("  a.py:12 class Name").
_GREP_MATCH = re.compile(r"^([^\s:][^:\n]*):\d+:|^\s+(\S+): \d+$")
_DEFINED_AT = re.compile(r"^\s+(\S+):\d+ \S+ \S+")


def _matched_in(tool: str, output: str) -> list[str]:
    """The files a grep matched in, or where find_symbol found a name defined."""
    lines = output.splitlines()
    if tool == "grep":
        return [m.group(1) or m.group(2) for line in lines if (m := _GREP_MATCH.match(line))]
    if tool == "find_symbol" and lines and lines[0].endswith(" is defined in:"):
        return [m.group(1) for line in lines[1:] if (m := _DEFINED_AT.match(line))]
    return []


@dataclass
class Citations:
    """What one reader's calls showed it, and the map it was shown."""

    code_map: RepoMap | None = None
    shown: frozenset[str] = frozenset()
    """The files the map in its prompt names."""
    seen: set[str] = field(default_factory=set)
    """Workspace-relative paths its calls opened, listed or matched (folders too)."""
    looked_into: set[str] = field(default_factory=set)
    """The files whose insides its calls showed: opened, a grep's match in them, or the
    definition of a name find_symbol looked up. Not a listing, a file found by its name,
    a search by words (the map's own guess), a hint in an error or a "no matches", nor
    a path a matched line mentions."""
    searched: list[tuple[str, bool]] = field(default_factory=list)
    """What each search looked for, and whether it found nothing."""
    container_root: str | None = None
    through_workers: bool = False
    """It looks through workers: their reports count, the map does not."""
    denied: set[tuple[str, str]] = field(default_factory=set)
    """What workers' reports mark unsupported: (name, file), or ("", file) for a file."""

    def note(self, call: PendingCall, result: ToolResult) -> None:
        """A call's result, as the reader saw it."""
        args = call.arguments if isinstance(call.arguments, dict) else {}
        if call.name == "delegate":  # a worker that failed still reports what it saw
            for report in result.parts or (result.output,):
                self._reported(report)
            return
        if result.is_error and call.name not in SEARCHES:
            return
        if call.name == "read_file":
            if isinstance(path := args.get("path"), str):
                self.seen.add(self._relative(path))
                self.looked_into.add(self._relative(path))
            return
        if call.name in SEARCHES and isinstance(query := args.get(SEARCHES[call.name]), str):
            self.searched.append((query, found_nothing(call.name, result.output)))
        if call.name != "list_dir":  # a listing's names are bare: joined to its folder below
            shown = _without_summaries(call.name, result.output)
            self.seen.update(named_paths(shown, self.container_root) + _bare(shown, self._folders))
        if not result.is_error and not found_nothing(call.name, result.output):
            self.looked_into.update(map(self._relative, _matched_in(call.name, result.output)))
        if call.name == "list_dir":
            folder = self._relative(str(args.get("path") or "."))
            for line in result.output.splitlines():
                entry = line.strip().split(" ")[0].rstrip("/")
                if entry and not entry.startswith(("[", "(")):
                    self.seen.add(entry if folder in ("", ".") else f"{folder}/{entry}")

    def _reported(self, report: str) -> None:
        """A worker's report: the files its answer names count as seen, but for those
        gaffer's line marks unsupported, which are remembered as such."""
        read = read_report(report)
        if read is None:  # not a worker's report: what it names, outside gaffer's marks
            lines = [line for line in report.splitlines() if UNSUPPORTED not in line]
            self.seen.update(named_paths("\n".join(lines), self.container_root, self._folders))
            return
        denied = read.denied.pairs()
        self.denied.update(denied)
        answer = "\n".join(line for line in read.answer.splitlines() if UNSUPPORTED not in line)
        self.seen.update(
            path
            for path in named_paths(answer, self.container_root, self._folders)
            if not any(not name and _same_file(path, file) for name, file in denied)
        )

    def unsupported(self, answer: str) -> list[str]:
        """The claims of `answer` its calls and the map do not bear out, each in a few
        words; [] when every one is."""
        problems: list[str] = []
        for path in named_paths(answer, self.container_root, self._folders):
            if self._known(path.rstrip("/")):  # another worker's report shows it
                continue
            if any(not name and _same_file(path, file) for name, file in self.denied):
                problems.append(f"it names {path}, which a worker named without opening it")
            else:
                problems.append(f"it names {path}, which {self._none_showed}{self._meant(path)}")
        for sentence in _SENTENCE.split(answer):
            problems += self._placed(sentence) + self._absent(sentence)
        return list(dict.fromkeys(problems))

    def not_looked_into(self, answer: str) -> tuple[str, ...]:
        """The files `answer` names that none of its calls looked inside (the map, a
        listing or a file's name showed them): its claims there are a guess as good as
        the map's. None for an agent that looks through workers."""
        if self.through_workers:
            return ()
        return tuple(
            path
            for path in named_paths(answer, self.container_root)
            if not path.endswith("/")
            and not any(_same_file(path, known) for known in self.looked_into)
        )

    @property
    def _unmapped(self) -> list[str]:
        return self.code_map.problems if self.code_map is not None else []

    def map_entries(self, text: str) -> list[str]:
        """Where the map defines the code names `text` mentions: `X in F:line`."""
        if self.code_map is None:
            return []
        return [
            f"{name} in {path}:{symbol.line}"
            for name in _names(text)
            for path, symbol in self.code_map.definitions_of(name)[:2]
        ][: MAX_SHOWN * 2]

    @property
    def _files(self) -> tuple[str, ...]:
        """The paths the map holds or a call showed."""
        return (*(self.code_map.files if self.code_map else ()), *self.shown, *self.seen)

    @functools.cached_property
    def _mapped_folders(self) -> frozenset[str]:
        """The top-level folders of the map and of the files it was shown: these do not
        change, and the map may hold tens of thousands of files."""
        files = (*(self.code_map.files if self.code_map else ()), *self.shown)
        return _top_folders(files)

    @property
    def _folders(self) -> frozenset[str]:
        """The workspace's top-level folders that the map or a call showed: a path such
        as `supervisor/delegation` names one of them only (no suffix, no closing slash)."""
        return self._mapped_folders | _top_folders(self.seen)

    def _meant(self, path: str) -> str:
        """`supervisor/delegation` written for `supervisor/delegation.py`: which it is."""
        near = sorted(known for known in self._files if known.startswith(path.rstrip("/") + "."))
        return f" (there is {near[0]})" if near else ""

    @property
    def _none_showed(self) -> str:
        if self.through_workers:
            return "no worker's report shows"
        return "none of your calls opened, listed or matched"

    def _known(self, path: str) -> bool:
        """A file or folder a call or the map showed, or a folder holding one they did
        (`workers/`, where the map shows `workers/loop.py`)."""
        shown = () if self.through_workers else self.shown
        folder = path.strip("/") + "/"
        return any(
            _same_file(path, known) or known.startswith(folder) for known in (*self.seen, *shown)
        )

    def _placed(self, sentence: str) -> list[str]:
        """ "X is in F" where the map has X elsewhere, or a worker's report marked that
        very claim unsupported. Each path places the names said since the path before it
        ("X is in a.py, and Y in b.py"; "X, Y and Z are in c.py"), and the name written
        after it as the map writes one ("termui.py:347 class ProgressBar")."""
        wrong: list[str] = []
        known = self.code_map.definitions_of if self.code_map is not None else lambda _: []
        start = 0
        for end, place in path_spans(sentence, self.container_root):
            segment, start = sentence[start:end], end
            names = _names(segment) if _PLACES.search(segment) else []
            if after := _KIND_AND_NAME.match(sentence, end):
                names.append(after.group(1))
            if not names:
                continue
            wrong += [
                f"it repeats what a worker's report marks unsupported: {name} in {file}"
                for name, file in sorted(self.denied)
                if name in names and _same_file(place, file)
            ]
            if any(line.startswith(f"{place}: ") for line in self._unmapped):
                continue  # the map cannot read that file: it cannot say what is not in it
            for name in names:
                homes = sorted({path for path, _ in known(name)})
                if homes and not any(_same_file(place, home) for home in homes):
                    wrong.append(
                        f"it puts {name} in {place}; the map has it in {', '.join(homes[:3])}"
                    )
        return wrong

    def _absent(self, sentence: str) -> list[str]:
        """ "X is not there" with no search for X that found nothing. Not for an agent
        that looks through workers (their searches are in their reports), nor for "X is
        not in a.py" (a place, which the map judges)."""
        if self.through_workers or not _ABSENT.search(sentence) or named_paths(sentence):
            return []
        return [
            f"it says {name} is not there, and no search of yours looked for it and found nothing"
            for name in _names(sentence)
            if self._looks_like_code(name, sentence)
            and not any(name in q and none for q, none in self.searched)
        ]

    def _looks_like_code(self, name: str, sentence: str) -> bool:
        """Quoted, written as code by more than its capitals, or a CamelCase name the map
        defines: "no TypeScript here" names a language, not a class."""
        if f"`{name}" in sentence or written_as_code(name.lower()):
            return True
        return self.code_map is not None and bool(self.code_map.definitions_of(name))

    def _relative(self, path: str) -> str:
        root = (self.container_root or "").rstrip("/")
        if root and (path == root or path.startswith(root + "/")):
            path = path[len(root) :].lstrip("/")
        while path.startswith("./"):  # `./a.py`, never the dot of `.github/`
            path = path[2:]
        return str(PurePosixPath(path or "."))


def _top_folders(paths: Iterable[str]) -> frozenset[str]:
    return frozenset(path.split("/", 1)[0] for path in paths if "/" in path.strip("/"))


def _bare(output: str, folders: frozenset[str]) -> list[str]:
    """The paths with no suffix a call's output lists one a line (`sandbox_image/Dockerfile`,
    as find_files gives it) under one of the workspace's folders."""
    lines = (line.strip().split(":", 1)[0] for line in output.splitlines())
    return [line for line in lines if "/" in line and line.split("/", 1)[0] in folders]


def _names(sentence: str) -> list[str]:
    """The code names a sentence mentions: `quoted`, or written as code."""
    names = []
    for quoted, bare in _IDENTIFIER.findall(sentence):
        name = quoted or bare
        if (quoted or written_as_code(name)) and not named_paths(name):  # a file is no name
            names.append(name)
    return list(dict.fromkeys(names))
