"""The words of a task in prose and of the code's names, made comparable: a name's pieces
(`ProgressBar` → progress, bar), each word without its plural or verb ending, and the
common English words that name no code."""

from __future__ import annotations

import functools
import re
import threading
from typing import TYPE_CHECKING

from workers.guards.named_code import written_as_code

if TYPE_CHECKING:
    from snowballstemmer.basestemmer import BaseStemmer

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PIECE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
"""The words a name is made of: `ProgressBar`, `wait_exponential`, `HTTPServer`."""
_STEMMING = threading.Lock()
_PATHLIKE = re.compile(r"[\w./-]+\.\w+")

# Words of four letters or more that a task, or a file, says in prose: they name no code
# and say nothing about where the work is.
COMMON_WORDS = frozenset(
    """
    able about above after again also always answer before being
    below between both build called calls cause change changes check
    class classes code come comes could define defined defines does
    done each every explain fail fails file files find fine
    first folder folders from function functions give gives have here
    into just know like list look made make many method
    methods module modules more most much must name named names
    need newcomer only other over package part parts pass please
    project pytest python python3 read repository right same should show
    some such survey tell test tested tests than that their
    them then there these they this those through used uses
    using want were what when whenever where which while will
    with without work works would write wrong your
    """.split()  # noqa: SIM905 - a list of words, kept readable
)


def mentions(task: str) -> tuple[set[str], set[str]]:
    """The identifiers the task names and its path-like words. An identifier is a word
    written as code (in backticks, or with an underscore, a capital inside or a digit),
    or a word of four letters or more that is not common English: "reply" is one, and
    "file", "where" and "defined" are not."""
    quoted = set(_WORD.findall(" ".join(re.findall(r"`([^`]+)`", task))))
    words = {
        word
        for word in _WORD.findall(task)
        if word in quoted
        or written_as_code(word)
        or (len(word) >= 4 and word.lower() not in COMMON_WORDS)
    }
    return words, set(_PATHLIKE.findall(task))


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A word in lower case as Snowball's English stemmer (Porter's second) has it, the
    same for the task's words and a name's pieces: "validates", "validator" and
    "validation" → valid, "decorator" → decor, "retries" → retri, "lexers" → lexer."""
    with _STEMMING:  # one stemmer, whose state is the word at hand: readers are threads
        return str(_english().stemWord(word.lower()))


@functools.cache
def _english() -> BaseStemmer:
    from snowballstemmer.english_stemmer import EnglishStemmer  # 10 ms: at the first word

    return EnglishStemmer()


@functools.lru_cache(maxsize=1 << 16)
def pieces(name: str) -> frozenset[str]:
    """The stemmed words a path part or a name is made of, of three letters or more."""
    return frozenset(stem(piece) for piece in _PIECE.findall(name) if len(piece) >= 3)
