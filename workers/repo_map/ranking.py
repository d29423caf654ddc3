"""The map as an agent is shown it: the files that matter most to its task first, each
with its symbols and their lines, within a share of the model's window.

Ranked as aider ranks its repo map: a graph of files, an edge from each file to the files
that define the names it uses, and PageRank over it, personalized toward what the task
names (a file's path or name, an identifier). Names the task mentions weigh more, names
defined all over (`get`, `run`) and private ones less.

A task in prose names no identifier: "which file draws the progress bar", "where the
agent loop lives". So, as aider matches the task's words against a path's parts, a task
word also leads to the files whose folders, name or defined names are made of it
(`workers/loop.py`, `ProgressBar`, `wait_exponential`), each word weighing less the more
files it leads to, so "lexer" among a hundred lexers counts little beside "json".
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import defaultdict
from pathlib import Path, PurePosixPath

from workers import numbered
from workers.repo_map.index import PROMPT_SECONDS, RepoMap, build
from workers.repo_map.search import Found, Search
from workers.repo_map.symbols import Symbol
from workers.repo_map.words import mentions, pieces, stem
from workers.tools.base import CHARS_PER_TOKEN

MENTIONED_WEIGHT = 10.0
"""How much more a name the task mentions counts, as an edge and as a definition."""
COMMON_AT = 5
"""A name defined in more files than this says nothing about any of them: it makes no
edge (unless the task names it)."""
ROUNDS = 30
DAMPING = 0.85
NAME_PIECE_SHARE = 0.3
"""A task word in a defined name leads less than one in the path: a file is about what
its path says, and names a word in passing."""
TOPIC_WEIGHT = 3.0
"""How much more a definition made of the task's words counts in its file's share."""
FURTHER_SYMBOL = 0.7
"""Each further definition of a file counts this much less than the one before: the
files next in rank show their best before one file shows its every name."""
MAP_SHARE = 1 / 10
"""Of the model's window, what the map in the system prompt may take."""
MAX_MAP_TOKENS = 2048
"""And at most this, whatever the window (aider's default map is 1,024 tokens)."""
ASKED_FILES = 3
"""For each question, the files its words find best that the map is sure to show."""
ASKED_SHARE = 0.6
"""Of the map's room, what those may take; the rest goes by rank."""
HEADER = (
    "The workspace's files that matter most to the task, with what each defines (line: kind name):"
)


def map_chars(window_tokens: int) -> int:
    """The characters the map may take for a model with this window."""
    return int(min(window_tokens * MAP_SHARE, MAX_MAP_TOKENS) * CHARS_PER_TOKEN)


def ranked_files(repo: RepoMap, task: str) -> list[tuple[str, float]]:
    """Every mapped file with its rank, highest first."""
    words, _ = mentions(task)
    defined: dict[str, set[str]] = defaultdict(set)
    for path, found in repo.files.items():
        for symbol in found.definitions:
            defined[symbol.name.rpartition(".")[2]].add(path)
    edges: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for path, found in repo.files.items():
        for name, count in found.references.items():
            targets = defined.get(name, ())
            if len(targets) > COMMON_AT and name not in words:
                continue  # `run` defined in 2,000 files says nothing, and would cost n² edges
            for target in targets:
                if target != path:
                    edges[path][target] += _weight(name, words) * math.sqrt(count)
    asked = [mentions(question) for question in (task, *questions(task))]
    made_of = _made_of(repo, {stem(word) for words, _ in asked for word in words})
    wanted: dict[str, float] = defaultdict(float)
    for words, paths in asked:  # each question its equal share, and the whole
        share = _wanted(repo, defined, made_of, words, paths)
        total = sum(share.values())
        for path, weight in share.items():
            wanted[path] += weight / total
    return _pagerank(list(repo.files), edges, wanted)


def questions(task: str) -> list[str]:
    """The numbered items of a task that has two or more (the way task_parts hands a
    question's parts out); [] otherwise."""
    found = numbered.items(task)
    return found if len(found) >= 2 else []


def _wanted(
    repo: RepoMap,
    defined: dict[str, set[str]],
    made_of: dict[str, tuple[frozenset[str], frozenset[str]]],
    words: set[str],
    paths: set[str],
) -> dict[str, float]:
    """What one question leads to: the files it names, or whose definitions it names
    (`defined`: each short name's files), then those made of its words."""
    wanted = dict.fromkeys((path for word in words for path in defined.get(word, ())), 1.0)
    if paths:
        wanted |= {p: 1.0 for p in repo.files if p in paths or PurePosixPath(p).name in paths}
    for path, weight in _topical(made_of, {stem(word) for word in words}).items():
        wanted[path] = wanted.get(path, 0.0) + weight
    return wanted


def _made_of(repo: RepoMap, topics: set[str]) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """For each file made of any of `topics`: those in its path, and those in its defined
    names only. Read once for all of a task's questions."""
    cache: dict[str, frozenset[str]] = {}

    def words_of(names: list[str]) -> frozenset[str]:
        have: frozenset[str] = frozenset()
        for name in names:
            if name not in cache:  # a stem is a piece's start: most names have none
                low = name.lower()
                hit = any(topic in low for topic in topics)
                cache[name] = pieces(name) & topics if hit else frozenset()
            have |= cache[name]
        return have

    found: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    if not topics:
        return found
    for path, symbols in repo.files.items():
        in_path = words_of(list(PurePosixPath(path).with_suffix("").parts))
        in_names = words_of([s.name.rpartition(".")[2] for s in symbols.definitions])
        if in_path or in_names:
            found[path] = (in_path, in_names - in_path)
    return found


def _topical(
    made_of: dict[str, tuple[frozenset[str], frozenset[str]]], topics: set[str]
) -> dict[str, float]:
    """Files made of one question's `topics`: for each, the sum over the words it has of
    one over the number of files that have that word (a word in a name only counts
    NAME_PIECE_SHARE of one in the path)."""
    found = {
        path: (in_path & topics, in_names & topics)
        for path, (in_path, in_names) in made_of.items()
        if (in_path | in_names) & topics
    }
    files_with: dict[str, int] = defaultdict(int)
    for in_path, in_names in found.values():
        for word in in_path | in_names:
            files_with[word] += 1
    return {
        path: sum(1 / files_with[w] for w in in_path)
        + NAME_PIECE_SHARE * sum(1 / files_with[w] for w in in_names)
        for path, (in_path, in_names) in found.items()
    }


def _weight(name: str, mentioned: set[str]) -> float:
    weight = MENTIONED_WEIGHT if name in mentioned else 1.0
    return weight * 0.1 if name.startswith("_") else weight


def _pagerank(
    nodes: list[str], edges: dict[str, dict[str, float]], wanted: dict[str, float]
) -> list[tuple[str, float]]:
    """PageRank by power iteration; teleports go to `wanted` (every node when empty), and
    a node with no edges out gives its rank back the same way."""
    if not nodes:
        return []
    base = wanted or dict.fromkeys(nodes, 1.0)
    total = sum(base.values())
    jump = {node: base.get(node, 0.0) / total for node in nodes}
    rank = dict(jump)
    out = {node: sum(edges[node].values()) for node in edges}
    for _ in range(ROUNDS):
        lost = sum(rank[node] for node in nodes if not out.get(node))
        following = dict.fromkeys(nodes, 0.0)
        for source, targets in edges.items():
            share = rank[source] / out[source]
            for target, weight in targets.items():
                following[target] += share * weight
        rank = {
            node: (1 - DAMPING) * jump[node] + DAMPING * (following[node] + lost * jump[node])
            for node in nodes
        }
    return sorted(rank.items(), key=lambda pair: (-pair[1], pair[0]))


def rendered(repo: RepoMap, task: str, max_chars: int, search: Search | None = None) -> str:
    """The map for `task` in at most `max_chars` characters; "" when nothing is mapped.

    First, for each of the task's questions (the whole task when it has no numbered
    ones), the ASKED_FILES files whose definitions its words find best (search.py), each
    with that definition and what its docstring says it is, within ASKED_SHARE of the
    room. Then definitions best first (their file's rank, more for a name the task
    mentions, less for a method or a private name) until the room is spent. Shown by
    file in rank order, each file's in line order."""
    words, _ = mentions(task)
    topics = {stem(word) for word in words}
    files = ranked_files(repo, task)
    order = {path: place for place, (path, _) in enumerate(files)}
    chosen: dict[str, list[Symbol]] = {}
    said: set[tuple[str, Symbol]] = set()
    used = len(HEADER) + 1

    def take(path: str, symbol: Symbol, line: str, room: int) -> bool:
        nonlocal used
        cost = len(line) + 1 + (0 if path in chosen else len(path) + 3)
        if used + cost > room or symbol in chosen.get(path, []):
            return False
        chosen.setdefault(path, []).append(symbol)
        used += cost
        return True

    search = search or Search(repo)
    asked = [search.best(question, ASKED_FILES) for question in questions(task) or [task]]
    # In turns, each question's best file first: scores are not comparable across
    # questions (one of more words scores higher), and each question is owed its room.
    for found in [f for turn in itertools.zip_longest(*asked) for f in turn if f]:
        if take(
            found.path, found.symbol, _line(found.symbol, said=True), int(max_chars * ASKED_SHARE)
        ):
            said.add((found.path, found.symbol))
    scored = []
    for path, rank in files:
        weighed = sorted(
            ((_symbol_weight(s, words, topics), s) for s in repo.files[path].definitions),
            key=lambda pair: (-pair[0], pair[1].line),
        )
        scored += [
            (-rank * weight * FURTHER_SYMBOL**place, order[path], symbol.line, path, symbol)
            for place, (weight, symbol) in enumerate(weighed)
        ]
    scored.sort(key=lambda item: item[:3])
    for *_, path, symbol in scored:
        take(path, symbol, _line(symbol), max_chars)  # a shorter line further down may still fit
    if not chosen:
        return ""
    blocks = [
        "\n".join(
            [
                f"`{path}`",
                *(
                    _line(s, said=(path, s) in said)
                    for s in sorted(chosen[path], key=lambda s: s.line)
                ),
            ]
        )
        for path in sorted(chosen, key=lambda p: order.get(p, len(order)))
    ]
    return "\n".join([HEADER, *blocks])


def files_shown(shown: str) -> list[str]:
    """The files a rendered map shows: its file lines only, never a path a docstring's
    words mention."""
    return [
        line[1:-1] for line in shown.splitlines() if line.startswith("`") and line.endswith("`")
    ]


def _symbol_weight(symbol: Symbol, words: set[str], topics: set[str]) -> float:
    short = symbol.name.rpartition(".")[2]
    weight = MENTIONED_WEIGHT if short in words or symbol.name in words else 1.0
    if any(topic in short.lower() for topic in topics) and pieces(short) & topics:
        weight *= TOPIC_WEIGHT
    if "." in symbol.name or symbol.kind == "method":
        weight *= 0.3
    if short.startswith("_"):
        weight *= 0.1
    return weight


def _line(symbol: Symbol, *, said: bool = False) -> str:
    return f"  {symbol.line}: " + (symbol.described() if said else f"{symbol.kind} {symbol.name}")


class RunMap:
    """One run's map of its workspace, built when first asked for (agents are built from
    several threads) and then shared: every agent of the run is shown the same files."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._lock = threading.Lock()
        self._built: RepoMap | None = None
        self._shown: dict[tuple[str, int], str] = {}
        self._search: Search | None = None

    def shown(self, task: str, room: int) -> str:
        """The map ranked toward `task` within `room` characters, ranked once for every
        agent of the run that is shown it (workers start many at once)."""
        repo = self.get()
        with self._lock:
            if (task, room) not in self._shown:
                self._shown[(task, room)] = rendered(repo, task, room, self._searched(repo))
            return self._shown[(task, room)]

    def best(self, question: str, files: int) -> list[Found]:
        """The files `question`'s words find best (search.py), on the run's map."""
        repo = self.get()
        with self._lock:
            search = self._searched(repo)
        return search.best(question, files)

    def _searched(self, repo: RepoMap) -> Search:
        """The run's search, built the first time it is needed (with the lock held)."""
        if self._search is None:
            self._search = Search(repo)
        return self._search

    def get(self) -> RepoMap:
        """The map, or an empty one that says why when it cannot be built: a map is an
        aid, and no fault of one ends a run."""
        with self._lock:
            if self._built is None:
                try:
                    self._built = build(self.workspace, seconds=PROMPT_SECONDS)
                except Exception as error:
                    self._built = RepoMap(problems=[f"…: the map could not be built ({error})"])
            return self._built
