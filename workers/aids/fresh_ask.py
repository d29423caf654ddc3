"""How a fresh sample of the change is asked for (workers/aids/fresh_attempts.py): the
task and the files as they were, what it may write, and where its reply ends."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from workers.aids.file_blocks import HOW_TO_WRITE
from workers.aids.focused_write import ASK_FOR_CHANGE, MAX_TASK_CHARS, cut, fenced, texts
from workers.guards.editing import block_start
from workers.guards.test_runs import steers_tests
from workers.hooks import View
from workers.model import MAX_STOP_TEXTS

# A sample rewrites the files it may write. A small model then copies out the tests it
# was shown (`sliced`: 759 tokens, 80 s, where the code took 300), so its reply stops
# where a test file's path line over a block begins, and is capped at twice the size of
# the files it may write, in tokens (about 3 characters a token of code; a stub grows),
# with room for a sentence, and never below what a 30-line function and its docstring
# take: past that it is looping.
CHARS_PER_TOKEN = 3
SAMPLE_ROOM_TOKENS = 200
MIN_SAMPLE_TOKENS = 768


@dataclass(frozen=True)
class Ask:
    """How a sample is asked for."""

    text: str
    may_write: frozenset[str]
    """The files shown, tests and test setup aside."""
    cap: int
    """Output tokens, fitted to the files it may write."""
    stop: tuple[str, ...]
    """A test file's path line over a block: where a copy of the tests would begin."""


def prompt(view: View) -> Ask | None:
    """The task and the files the agent has seen, as they were before it began (code
    first, tests last, within the room for files), and what a sample may write. None when
    no file can be shown."""
    seen = view.files_seen()
    assert seen is not None and view.tracks_changes
    files = texts(seen.seen, view.original, view.room_for_files)
    if not files:
        return None
    shown = [f"{path}\n{fenced(text, path)}" for path, text in files]
    ask = "\n\n".join([cut(view.task, MAX_TASK_CHARS), *shown, f"{ASK_FOR_CHANGE} {HOW_TO_WRITE}"])
    may_write = {path: text for path, text in files if not steers_tests(path)}
    tests = [path for path, _ in files if path not in may_write]
    stop = tuple(block_start(path) for path in tests[:MAX_STOP_TEXTS])
    return Ask(ask, frozenset(may_write), fitted_cap(may_write.values()), stop)


def fitted_cap(texts: Iterable[str]) -> int:
    """Output tokens enough to write these files twice over, and a sentence."""
    fitted = 2 * sum(len(text) for text in texts) // CHARS_PER_TOKEN + SAMPLE_ROOM_TOKENS
    return max(MIN_SAMPLE_TOKENS, fitted)
