"""Which files a task is about, read for an agent before its first step.

The files the task names come first. A task in a user's words often names none ("the
stock value comes out wrong"): then the files its words appear in, best first. Either
way, the workspace modules those Python files import follow, since a test names its
module under test and a module its helpers. A small model that sees the code at once
writes the change; sent looking, it reads the same files again and again.

Everything is read through confinement (never a link out) and bounded: a huge tree
costs a bounded walk, a huge file is skipped.
"""

from __future__ import annotations

import ast
import itertools
import os
import re
from pathlib import Path

from workers import python_source
from workers.aids.joined_reports import FIRST_ANSWER_HEADING
from workers.guards.named_code import named_paths
from workers.hooks import ATTACHED, FOUND, Aid, View
from workers.repo_map.words import COMMON_WORDS
from workers.tools.base import ToolError
from workers.tools.names import MAX_NAME_HINTS, name_words, named_like
from workers.tools.python_grep import walk_files
from workers.tools.workspace import read_confined

MAX_ATTACHED = 5
MAX_FILES_SEEN = 2000
MAX_FILE_BYTES = 64 * 1024
MAX_FOUND = 3
MAX_CHOSEN = 6
_WORD = re.compile(r"[A-Za-z][A-Za-z_]{3,}")


class TaskFiles(Aid):
    """The files the task is about, read with the agent's own read_file in its own
    sandbox and told to it as one message before its first step, as a user's @-mention
    would attach them: those it names, or for an agent that edits, those its words are
    in, and what they import. A name that is not a readable file is left out unsaid;
    together they take at most the room for files."""

    def __init__(self, container_root: str | None, workspace: Path | None = None) -> None:
        self.container_root = container_root
        """Where the agent's sandbox mounts the workspace, if anywhere."""
        self.workspace = workspace
        """For a reader whose task names no file: where the paths its words are in are."""

    def before_first_step(self, view: View) -> None:
        if view.looked:
            return  # a resumed conversation has its files
        room, root, edits = view.room_for_files, self.container_root, view.files_seen()
        # A first answer sent with the task (task_parts.py) is to be checked, not read for it.
        task = (
            view.latest_request.rpartition("\n\n" + FIRST_ANSWER_HEADING + "\n")[0]
            or view.latest_request
        )
        paths = task_files(edits.workspace, task, root) if edits else named_paths(task, root)
        if not paths and edits is None and self.workspace is not None:
            self._found(view, self.workspace, task)
            return
        attached: list[str] = []
        for path in paths:
            result = view.read_in_sandbox(path)
            if result.is_error or len(result.output) > room:
                continue
            room -= len(result.output)
            attached.append(f'<file path="{path}">\n{result.output.rstrip()}\n</file>')
            view.saw(path, result.output)
            if len(attached) == MAX_ATTACHED:
                break
        if attached:
            view.tell("\n\n".join([ATTACHED, *attached]), source="attachment")

    def _found(self, view: View, workspace: Path, task: str) -> None:
        """A reader asked in words ("where the agent loop lives") is told the paths those
        words are in, or, when no path holds them, the top level as list_dir shows it: a
        small model then answers from that, where sent looking it listed folders it had
        guessed, one a reply. The words are the first paragraph's, the question itself."""
        question = task.strip().split("\n\n", 1)[0]
        words = name_words(question)
        if found := named_like(workspace, workspace, words, by_path=True):
            shown = found[:MAX_NAME_HINTS]
            more = f"\n[{len(found) - len(shown)} more]" if len(found) > len(shown) else ""
            held = " or ".join(repr(word) for word in words)
            said = f"Files and folders whose paths hold {held}:\n" + "\n".join(shown) + more
        else:
            listing = view.read_in_sandbox(".", tool="list_dir")
            if listing.is_error:
                return
            # Its own folders, as the glance has them: a small model retold ".ci/" as "ci/".
            lines = [line for line in listing.output.splitlines() if _own(line)]
            said = "The top level of the workspace (list_dir .):\n" + "\n".join(lines)
        view.tell(f"{FOUND}\n{said}", source="attachment")


def _own(listed: str) -> bool:
    """A line of a listing that is the project's own entry: not a dot-folder, packaging
    metadata, or the listing's note of what it skipped."""
    name = listed.split("  ", 1)[0]
    hidden = name.startswith(".") and name.endswith("/")
    return not (hidden or name.endswith(".egg-info/") or listed.startswith("[skipped"))


def task_files(workspace: Path, task: str, container_root: str | None = None) -> list[str]:
    """Workspace-relative paths of the files the task is about, in the order to show
    them: named ones (or, when none, found ones), then what those import."""
    chosen = [p for p in named_paths(task, container_root) if _is_file(workspace, p)]
    if not chosen:
        chosen = files_about(workspace, task)
    for path in chosen:  # what the added ones import is added too, up to MAX_CHOSEN
        chosen += [m for m in _imported(workspace, path) if m not in chosen]
        if len(chosen) >= MAX_CHOSEN:
            break
    return chosen[:MAX_CHOSEN]


def files_about(workspace: Path, task: str) -> list[str]:
    """Up to MAX_FOUND text files that hold the most of the task's words."""
    words = task_words(task)
    if not words:
        return []
    scored: list[tuple[int, str]] = []
    files = itertools.islice(walk_files(workspace, hidden=False), MAX_FILES_SEEN)
    for path in (os.path.relpath(f, workspace) for f in files):
        text = _text(workspace, path)
        if text is not None and (hits := sum(word in text.lower() for word in words)):
            scored.append((hits, path))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [path for _hits, path in scored[:MAX_FOUND]]


def task_words(task: str) -> set[str]:
    """The task's telling words, lowercased, with a plural's ending off ("inches" finds
    CM_PER_INCH)."""
    words = set()
    for word in _WORD.findall(task):
        word = word.lower()
        if word in COMMON_WORDS:
            continue
        if word.endswith("es") and len(word) > 5:
            word = word[:-2]
        elif word.endswith("s") and len(word) > 4:
            word = word[:-1]
        words.add(word)
    return words


def _imported(workspace: Path, path: str) -> list[str]:
    """The workspace's own modules a Python file imports, beside it or at the top."""
    if not path.endswith(".py") or (text := _text(workspace, path)) is None:
        return []
    try:
        tree = python_source.parse(text)
    except (SyntaxError, ValueError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    here = os.path.dirname(path)
    found = []
    for name in names:
        module = name.replace(".", "/") + ".py"
        for candidate in dict.fromkeys([os.path.join(here, module), module]):
            if _is_file(workspace, candidate) and candidate not in found:
                found.append(os.path.normpath(candidate))
                break
    return found


def _is_file(workspace: Path, path: str) -> bool:
    full = os.path.join(workspace, path)
    return os.path.isfile(full) and not os.path.islink(full)


def _text(workspace: Path, path: str) -> str | None:
    try:
        data = read_confined(workspace, path, MAX_FILE_BYTES)
    except ToolError:
        return None
    if data is None or len(data) > MAX_FILE_BYTES or b"\0" in data[:1024]:
        return None
    return data.decode("utf-8", errors="replace")
