"""Which definitions a question in prose is about.

A question names no identifier ("the formatter that writes LaTeX", "the error raised
when pydantic is used wrongly"), and a small model that greps for one word at a time
spends its budget on it. Each definition is taken as a short document: the words of its
name, of its docstring's first sentence, and of its file's path. A question's words find
them as a search engine finds pages, by BM25 (the ranking Lucene and Elasticsearch use),
so a word found in a few definitions counts far more than one found in hundreds.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import PurePosixPath

from workers.repo_map.index import RepoMap
from workers.repo_map.symbols import Symbol
from workers.repo_map.words import COMMON_WORDS, mentions, pieces, stem

NAME_WEIGHT = 2.0
"""A word in the name counts twice one in the docstring: the name is what it is."""
PATH_WEIGHT = 0.5
"""And one in its file's path half: the path is shared by every definition in it."""
K1 = 1.2
B = 0.3
"""How fast more of one word stops counting (BM25's usual k1), and how much a long
document's words count less: less than BM25's usual 0.75, as a longer document here is a
definition whose docstring says more of what it is (on the survey's questions, 0.75 put
the answer's file among the first three for 45 of 56, 0.3 for 47; with Snowball's
stems, 0.3 puts it first for 42 of the 56, among the first three for 50, where 0.75 puts
it first for 41; the 56 take in the 18 held-out questions)."""
METHOD_SHARE = 0.5
PRIVATE_SHARE = 0.7
"""A method, or a private name, is less often what a question is after than the class
or the public function it belongs to."""
CONSTANT_SHARE = 0.8
"""And a constant (`TypeAdapterT`, `ROOT_KEY`) less than what it is the type or the key of."""
_PROSE_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Found:
    path: str
    symbol: Symbol
    score: float


class Search:
    """One map's definitions, indexed once for every question asked of them."""

    def __init__(self, repo: RepoMap) -> None:
        self.entries: list[tuple[str, Symbol]] = []
        self.postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        lengths: list[float] = []
        for path, found in repo.files.items():
            in_path: dict[str, float] = defaultdict(float)
            for part in PurePosixPath(path).with_suffix("").parts:
                for word in pieces(part):
                    in_path[word] += PATH_WEIGHT
            for symbol in found.definitions:
                terms = dict(in_path)
                for word in pieces(symbol.name.rpartition(".")[2]):
                    terms[word] = terms.get(word, 0.0) + NAME_WEIGHT
                for word in prose_words(symbol.summary):
                    terms[word] = terms.get(word, 0.0) + 1.0
                entry = len(self.entries)
                self.entries.append((path, symbol))
                lengths.append(sum(terms.values()))
                for word, weight in terms.items():
                    self.postings[word].append((entry, weight))
        self.lengths = lengths
        self.average = sum(lengths) / len(lengths) if lengths else 1.0

    def best(self, question: str, files: int) -> list[Found]:
        """The `files` files the question is most about, best first, each with the one
        of its definitions that matches best; [] when none has any of its words."""
        scores: dict[int, float] = defaultdict(float)
        total = len(self.entries)
        for word in question_words(question):
            posted = self.postings.get(word, [])
            if not posted:
                continue
            rarity = math.log(1 + (total - len(posted) + 0.5) / (len(posted) + 0.5))
            for entry, weight in posted:
                norm = K1 * (1 - B + B * self.lengths[entry] / self.average)
                scores[entry] += rarity * weight * (K1 + 1) / (weight + norm)
        best_of: dict[str, Found] = {}
        for entry, score in scores.items():
            path, symbol = self.entries[entry]
            short = symbol.name.rpartition(".")[2]
            score *= METHOD_SHARE if "." in symbol.name or symbol.kind == "method" else 1.0
            score *= PRIVATE_SHARE if short.startswith("_") else 1.0
            score *= CONSTANT_SHARE if symbol.kind == "constant" else 1.0
            if path not in best_of or score > best_of[path].score:
                best_of[path] = Found(path, symbol, score)
        ranked = sorted(best_of.values(), key=lambda f: (-f.score, f.path, f.symbol.line))
        return ranked[:files]


def question_words(question: str) -> set[str]:
    """The stemmed words a question is asked in: its identifiers' pieces, and its other
    words of four letters or more that are not common English."""
    words, _ = mentions(question)
    return {stem(word) for word in words} | {piece for word in words for piece in pieces(word)}


def prose_words(text: str) -> list[str]:
    """A docstring's words as the index keeps them: stemmed, three letters or more, not
    common English."""
    if not text:
        return []
    return [
        stem(word)
        for word in _PROSE_WORD.findall(text)
        if len(word) >= 3 and word.lower() not in COMMON_WORDS
    ]
