"""Samples joined by definition: two fresh samples of a change that each fail some tests
may make one that passes them all (workers/aids/fresh_attempts.py).

A 1.5B model asked for `encode` and `decode` again and again writes a right `encode` in
about half its samples and a right `decode` in one in eight, rarely both in one sample.
So when two samples failed, gaffer tries one's files with a function or class of the
other's in its place (with the imports and helpers it uses), where the other passed a
test the one failed: no model call, a test run each, at most MAX_JOINS a run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from workers.aids.python_merge import MergeProblem, definitions, merge, with_what_it_uses

# Test runs (no model call, a second or two each) of samples joined by definition, once a run.
MAX_JOINS = 6


@dataclass(frozen=True)
class FailedSample:
    """A sample that failed the tests: the files as it wrote them, the tests it failed
    (None when the run named none)."""

    attempt: int
    files: dict[str, str]
    failing: frozenset[str] | None


@dataclass
class Joins:
    """Samples joined by definition: two samples that each fail some tests (`rle`: one
    decodes right, another encodes right) may make one that passes them all. Each join is
    one sample's files with one function or class of another's in its place, tried only
    where the other passed a test the one failed; no model call, only a test run."""

    failed: list[FailedSample] = field(default_factory=list)
    tried: set[frozenset[tuple[str, str]]] = field(default_factory=set)
    left: int = MAX_JOINS

    def after(
        self, sample: FailedSample
    ) -> Iterator[tuple[int, tuple[int, int], str, dict[str, str]]]:
        """Joins of a failed sample with each earlier one, the one with fewer failing tests
        as the base first: the join's number in the run, (base, donor), the definition
        taken, the files to write."""
        earlier, self.failed = self.failed, [*self.failed, sample]
        self.tried.add(frozenset(sample.files.items()))
        pairs = [pair for e in earlier for pair in ((sample, e), (e, sample))]
        pairs.sort(key=lambda pair: _failing_count(pair[0]))
        for base, donor in pairs:
            if not _helps(donor, base):
                continue
            for path, name, files in _swaps(base, donor):
                if self.left <= 0:
                    return
                if (key := frozenset(files.items())) in self.tried:
                    continue
                self.tried.add(key)
                self.left -= 1
                number = MAX_JOINS - self.left
                yield number, (base.attempt, donor.attempt), f"{name} in {path}", files


def _failing_count(sample: FailedSample) -> int:
    return len(sample.failing) if sample.failing is not None else 1_000_000


def _helps(donor: FailedSample, base: FailedSample) -> bool:
    """The donor passed a test the base failed (any, when the base's run named none)."""
    if donor.failing is None:
        return False  # it failed in a way no test names: a collection error, a crash
    return base.failing is None or bool(base.failing - donor.failing)


def _swaps(base: FailedSample, donor: FailedSample) -> Iterator[tuple[str, str, dict[str, str]]]:
    """The base's files with one definition of the donor's in place; first those named in
    the tests the donor passed and the base failed (`decode` in `test_decode`)."""
    helped = " ".join((base.failing or frozenset()) - (donor.failing or frozenset()))
    for path in sorted(base.files.keys() & donor.files.keys()):
        if not path.endswith(".py"):
            continue
        ours, theirs = definitions(base.files[path]), definitions(donor.files[path])
        for name in sorted(ours.keys() & theirs.keys(), key=lambda n: (n not in helped, n)):
            block = with_what_it_uses(donor.files[path], name)
            if ours[name].strip() == theirs[name].strip() or block is None:
                continue
            try:  # the donor's imports and helpers come with it: `re` for its regex
                joined = merge(base.files[path], block)
            except MergeProblem:
                continue
            yield path, name, {**base.files, path: joined}
