"""Writes a model makes as fenced code blocks in its reply, for models that garble code
inside a tool call's JSON.

A small model asked for a file's new content writes good code in a markdown block and
poor code in an escaped JSON string (on the bench exercises: the canonical solution
against `return str(n)`). So an agent with file blocks on is not offered write_file and
edit_file; it replies with the file's path on a line of its own and the content in a
fenced block under it, and each block becomes a write_file call that runs like any other
(in the agent's sandbox, read-before-edit, logged, verified).

A Python block is merged into its file by definition (workers/aids/python_merge.py): small
models give the function they changed, not the whole file. A block with no path line is
for the one Python file the agent has read that defines what the block defines. Blocks
that cannot be written (a cut reply, a block that is not Python for a .py file, a file
that cannot be read here) are told to the model, never dropped unsaid.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

from workers.aids.python_merge import MergeProblem, defines, merge
from workers.guards.editing import EDIT_TOOLS
from workers.guards.named_code import named_paths
from workers.hooks import Aid, FilesSeen, Note, View
from workers.model import AssistantTurn, ToolCall
from workers.tools.base import ToolError
from workers.tools.workspace import read_confined

WRITE_NOW = (
    "To change a file, reply with its path on a line of its own and its corrected code in "
    "a fenced block under it."
)
CUT_BLOCK = (
    "Your reply was cut off inside a code block, so it was not written. Give only the "
    "functions you change, or the file in parts."
)
RUNAWAY = (
    "Your reply began repeating itself ({loop}), so gaffer ended it there. Write the code "
    "once, without the repetition."
)
WRITE_BLOCKS = "Change files with fenced blocks, as shown under Writing files below."
HOW_TO_WRITE = (
    "To write a file, reply with its path on a line of its own, then its complete new "
    "content in one fenced code block. For a Python file you may give only the functions "
    "and classes you change (with any imports they need); the rest of the file stays. "
    # An example with no function in it: a small model calls a function it was shown.
    'Example:\n\nsettings.py\n```python\nGREETING = "Hello"\n```'
)
# A fence opens with three or more backticks or tildes, indented at most three spaces,
# and closes with at least as many of the same character (CommonMark).
_OPENING = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
MAX_BLOCK_FILE_BYTES = 1024 * 1024
# Blocks in these languages are never a file's content: a diff, a terminal session.
_NEVER_CONTENT = frozenset({"diff", "patch", "console", "output", "log", "shell-session"})
# A block in one of these languages is content only for a file of that kind.
_ONLY_FOR = {
    "sh": (".sh",),
    "bash": (".sh", ".bash"),
    "shell": (".sh",),
    "zsh": (".zsh",),
    "text": (".txt",),
    "plaintext": (".txt",),
    "txt": (".txt",),
    "python": (".py", ".pyi"),
    "py": (".py", ".pyi"),
    "python3": (".py", ".pyi"),
}
_PYTHON_OR_NONE = frozenset({"", "python", "py", "python3"})
_PYTHON = _PYTHON_OR_NONE - {""}


@dataclass
class Block:
    info: str
    body: str
    before: str
    """The text between the previous block and this one, where its path line is."""
    closed: bool = True


@dataclass
class BlockWrites:
    """What the blocks of one reply come to."""

    calls: list[ToolCall] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    """Files with blocks that already hold exactly what the blocks would make them."""
    problems: list[str] = field(default_factory=list)
    """Blocks that look meant for a file and were not written, and why: for the model."""


def calls_from_blocks(text: str, guard: FilesSeen, call_id: str) -> list[ToolCall]:
    """A write_file call for each file that the blocks of `text` change; blocks that are
    examples, commands or output are left as prose."""
    return read_blocks(text, guard, call_id).calls


def read_blocks(text: str, guard: FilesSeen, call_id: str, *, cut: bool = False) -> BlockWrites:
    """The writes the blocks of `text` make, one per file (later blocks for the same file
    are merged into what earlier ones made), what they leave unchanged and what could not
    be written. A last block that never closes runs to the end of the reply, as in
    Markdown, unless the reply was `cut` at its length limit: then it is not written."""
    found = BlockWrites()
    kept: dict[str, str] = {}  # path → a block for it, when the task keeps it
    contents: dict[str, str] = {}  # path → its content after this reply's blocks so far
    originals: dict[str, str | None] = {}
    blocks = blocks_of(text)
    for block in blocks:
        label = _label(block, guard)
        path = label or _defining_file(block.body, guard)
        if path is None:
            continue
        if not _is_content_for(block.info, path):
            continue
        if guard.keeps(path) is not None:
            # A test the task keeps: one write the edit guard refuses with its pointer,
            # never "cut off, write it again".
            kept.setdefault(path, block.body)
            continue
        where = f"the block for {path}"
        if not block.closed and cut:
            found.problems.append(
                f"{where} was not written: your reply was cut off inside it. Give only the "
                "functions you change, or the file in parts."
            )
            continue
        if path not in originals:
            try:
                originals[path] = _current(guard, path)
            except ToolError as error:
                found.problems.append(f"{where} was not written: {error}")
                continue
        old = contents.get(path, originals[path])
        try:
            contents[path] = _applied(old, block, path)
        except MergeProblem as problem:
            found.problems.append(f"{where} was not written: {problem}")
    if (
        cut
        and not found.problems
        # a block with no path line, cut: said all the same; a cut block of written calls
        # (json) is not a file
        and any(not b.closed and not b.info.startswith("json") for b in blocks)
        and not kept
    ):
        found.problems.append(CUT_BLOCK)
    for path, new in [*kept.items(), *contents.items()]:
        old = originals.get(path)
        if old is not None and _same(old, new):
            found.unchanged.append(path)
            continue
        arguments = json.dumps({"path": path, "content": new})
        found.calls.append(
            ToolCall(id=f"{call_id}-{len(found.calls) + 1}", name="write_file", arguments=arguments)
        )
    return found


def blocks_of(text: str) -> list[Block]:
    """The fenced blocks of a reply, in order; a last one that never closes runs to the
    end and is marked not closed.

    In a Python block, a fence that opens another block in a language (```python) ends
    it, with the path line above that fence: a small model writing a second file often
    forgets the first one's closing fence, and in Markdown the second file's code would
    run into the first. A block of any other kind (Markdown holds fenced examples) ends
    only at its closing fence."""
    lines = text.replace("\r\n", "\n").split("\n")
    found: list[Block] = []
    since = 0  # where the text before the next block starts
    index = 0
    while index < len(lines):
        opening = _OPENING.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening.group("fence"), len(opening.group("indent"))
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        reopening = re.compile(rf"^ {{0,3}}{re.escape(fence)}[ \t]*[^`~\s][^`\n]*$")
        splits = _language(opening.group("info")) in _PYTHON
        end = next(
            (
                i
                for i in range(index + 1, len(lines))
                if closing.match(lines[i]) or (splits and reopening.match(lines[i]))
            ),
            len(lines),
        )
        after = end + 1
        if end < len(lines) and not closing.match(lines[end]):
            end = after = _above_its_path(lines, index, end)
        body = [_dedented(line, indent) for line in lines[index + 1 : end]]
        found.append(
            Block(
                info=opening.group("info").strip(),
                body="\n".join(body) + ("\n" if body else ""),
                before="\n".join(lines[since:index]),
                closed=end < len(lines),
            )
        )
        index = since = after
    return found


def _above_its_path(lines: list[str], opened: int, reopened: int) -> int:
    """Where a block that never closed ends, when another opens at `reopened`: above the
    blank lines and the one-word path line (`test_calc.py`) over the new one."""
    end = reopened
    while end - 1 > opened and not lines[end - 1].strip():
        end -= 1
    if len(lines[reopened].split()) > 1:
        return end  # ```python util.py: the path is in the fence, the line above is code
    above = lines[end - 1].strip("*`#:'\" ")
    if (
        end - 1 > opened
        and lines[end - 1] == lines[end - 1].lstrip()
        and named_paths(above) == [above]
    ):
        end -= 1
        while end - 1 > opened and not lines[end - 1].strip():
            end -= 1
    return end


def _language(info: str) -> str:
    return info.split()[0].lower() if info.split() else ""


def _label(block: Block, guard: FilesSeen) -> str | None:
    """The path a block is for: named in its info string (```python calc.py), or alone on
    the last line before it (`calc.py`, **calc.py**, calc.py:, # calc.py, File: calc.py).
    A bare name that is not at the top is the one file of that name the agent has read."""
    root = guard.container_root
    words = [
        w.removeprefix(f"{root}/") if root else w for w in block.info.replace(":", " ").split()
    ]
    in_info = [p for word in words[1:] + words[:1] for p in named_paths(word) if p == word]
    path = in_info[0] if in_info else None
    lines = [line for line in block.before.splitlines() if line.strip()]
    if path is None and lines:
        last = lines[-1].strip().strip("*`#:'\" ").removeprefix("File:").strip("*`:'\" ")
        alone = last.removeprefix(f"{root}/") if root else last
        paths = named_paths(last, root)
        path = paths[0] if len(paths) == 1 and paths[0] == alone else None
    if path is None:
        return None
    path = os.path.normpath(path)
    if "/" not in path and not os.path.lexists(guard.workspace / path):
        same_name = [seen for seen in guard.seen if os.path.basename(seen) == path]
        if len(same_name) == 1:
            return same_name[0]
    return path


def _defining_file(body: str, guard: FilesSeen) -> str | None:
    """The one Python file the agent has read (tests aside) that defines a function or
    class the block defines."""
    defined = defines(body)
    if not defined:
        return None
    found = []
    for path in guard.seen:
        name = os.path.basename(path)
        if not path.endswith(".py") or name.startswith("test_") or name.endswith("_test.py"):
            continue
        try:
            old = _current(guard, path)
        except ToolError:
            continue
        if old is not None and defined & defines(old):
            found.append(path)
    return found[0] if len(found) == 1 else None


def _is_content_for(info: str, path: str) -> bool:
    words = info.replace(":", " ").split()
    language = words[0].lower() if words else ""
    if language in _NEVER_CONTENT:
        return False
    if path.endswith(".py") and language not in _PYTHON_OR_NONE:
        return False
    kinds = _ONLY_FOR.get(language)
    return kinds is None or path.endswith(kinds)


def _current(guard: FilesSeen, path: str) -> str | None:
    """The file as it is, None when there is none; ToolError when it cannot be read here
    (outside the workspace, a link, too big, not text): a block must not replace what
    gaffer could not see."""
    data = read_confined(guard.workspace, path, MAX_BLOCK_FILE_BYTES)
    if data is None:
        return None
    if len(data) > MAX_BLOCK_FILE_BYTES:
        raise ToolError(f"{path} is over {MAX_BLOCK_FILE_BYTES // 1024} KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{path} is not UTF-8 text") from None


def _applied(old: str | None, block: Block, path: str) -> str:
    if old is None or not path.endswith(".py"):
        newline = "\r\n" if old is not None and "\r\n" in old else "\n"
        return block.body.replace("\n", newline)
    return merge(old, block.body)


def _same(old: str, new: str) -> bool:
    def normal(text: str) -> str:
        return text.replace("\r\n", "\n").rstrip("\n")

    return normal(old) == normal(new)


def _dedented(line: str, indent: int) -> str:
    return line[indent:] if line[:indent].strip() == "" else line.lstrip(" ")


class FileBlocks(Aid):
    """An agent that writes files as fenced blocks in its replies: it is not offered
    write_file and edit_file, each block of a reply becomes a write_file call run before
    the reply's own calls (a test run), and paused, it may still write."""

    hidden_tools = EDIT_TOOLS
    hint = WRITE_NOW
    answer_now = (
        "Tools are paused for this reply. If you know the change, write it now: the file's "
        "path on a line of its own, then its corrected code in a fenced block. Otherwise "
        "answer the task from the tool results above: {task}"
    )
    writes_while_paused = True

    def __init__(self) -> None:
        self._noted_unchanged = False

    def before_first_step(self, view: View) -> None:
        self._noted_unchanged = False

    def after_reply(self, view: View, turn: AssistantTurn) -> Note | None:
        """The reply's blocks written: what each did, for the agent. A reply of nothing
        but blocks that change nothing (a small model echoing what it wrote) is told so
        once, rather than taken for a final answer."""
        if (files := view.files_seen()) is None:
            return None
        blocks = read_blocks(turn.text, files, f"block-{view.step}", cut=turn.cut_off)
        if turn.runaway and blocks.problems:  # why it was cut, said first
            blocks.problems.insert(0, RUNAWAY.format(loop=turn.runaway))
        if blocks.problems:
            view.reply_was_bad()  # asked for again the same way, it comes back the same
        if blocks.calls or blocks.problems:
            return Note(write(view, blocks), source="file_blocks")
        if blocks.unchanged and not self._noted_unchanged and not turn.tool_calls:
            self._noted_unchanged = True
            return Note(UNCHANGED_BLOCKS.format(files=", ".join(blocks.unchanged)), "file_blocks")
        return None


def write_blocks(view: View, turn: AssistantTurn, label: str, *, checked: bool = True) -> str:
    """The file blocks of a reply run as the agent's write_file calls: what each did, for
    the agent ("" when it has none). `checked`: the repetition guard sees the writes."""
    files = view.files_seen()
    assert files is not None
    blocks = read_blocks(turn.text, files, f"{label}-{view.step}", cut=turn.cut_off)
    return write(view, blocks, checked=checked)


def write(view: View, blocks: BlockWrites, *, checked: bool = True) -> str:
    """The reply stays in the conversation as the model wrote it and the results go back
    as one message: the model never sees its code again as an escaped JSON string."""
    outcomes = []
    for call in blocks.calls:
        arguments = json.loads(call.arguments)
        # Checked like any call, so a test run after it is not "the same call again".
        said = view.run(call, arguments, checked=checked, from_block=True).output
        path = arguments["path"]
        outcomes.append(said if path in said else f"{path}: {said}")
    return "\n\n".join(outcomes + blocks.problems)


UNCHANGED_BLOCKS = (
    "Nothing was written: your blocks match the files as they are ({files}). Next, run "
    "the tests with run_shell, or give your final answer in plain sentences."
)
