"""Programs a repository's config makes git run by itself on the host, and what a host
git command must say to run none: an external diff or a textconv on anything that shows
a diff (`--no-ext-diff --no-textconv`), and no git at all unasked in a repository whose
config names a clean or smudge filter (which run even on `git status`)."""

from __future__ import annotations

import contextlib
import os
import re
from functools import lru_cache

from workers.tools.git_paths import run_git

# Options that make `git log` show diffs, which run a repository's diff programs (an
# external diff, textconv) unless told not to.
_LOG_DIFFS = re.compile(
    r"^(-p|--patch|-u|-U\d*|--unified.*|--stat|--numstat|--shortstat|--dirstat.*|--summary"
    r"|--word-diff.*|--color-words.*|-L.*|--raw|--patch-with-stat|-[MC].*|-[SG].*|-[cm]"
    r"|--cc|--pickaxe.*|--find-object.*)$"
)


def _shows_diffs(sub: str, rest: list[str]) -> bool:
    if sub in ("diff", "blame"):  # blame runs textconv unless told not to
        return True
    if sub == "log":
        return any(_LOG_DIFFS.match(a) for a in rest)
    if sub == "show":  # a commit shows its patch; `git show REV:path` shows a file
        operands = [a for a in rest if not a.startswith("-")]
        return "--no-patch" not in rest and not (operands and all(map(_names_a_file, operands)))
    return False


def _names_a_file(operand: str) -> bool:
    """`REV:path` or `:path`: a colon outside the revision's braces, not a commit found
    by its message (`:/fix`, `HEAD^{/fix}`) or by a reflog date (`HEAD@{10:00}`), whose
    patch `git show` shows."""
    outside_braces = re.sub(r"[@^]\{[^}]*\}", "", operand)
    return ":" in outside_braces and not outside_braces.startswith(":/")


# Filters git runs by itself, even on `git status`; diff programs are kept off by flags.
_PROGRAM_KEYS = r"^filter\..+\.(clean|smudge|process)$"


@lru_cache(maxsize=64)
def _programs_named(root: str, config_stamp: tuple[float, ...]) -> str:
    done = run_git(root, "config", "--name-only", "--get-regexp", _PROGRAM_KEYS)
    if done is None or done.returncode != 0:
        return ""
    names = sorted({os.fsdecode(line).strip() for line in done.stdout.splitlines() if line})
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def repository_programs(root: str) -> str:
    """The config keys of filters git would run by itself in this repository (a clean or
    smudge filter, even on `git status`), or ""."""
    stamps = []
    for config in (".git/config", ".git/commondir"):
        with contextlib.suppress(OSError):
            stamps.append(os.stat(os.path.join(root, config)).st_mtime)
    return _programs_named(root, tuple(stamps))


def diff_programs_unsaid(sub: str, rest: list[str]) -> str | None:
    """Why `git SUB REST` could run a repository's diff programs, or None."""
    needed = {"--no-textconv"} if sub == "blame" else {"--no-ext-diff", "--no-textconv"}
    if not _shows_diffs(sub, rest) or needed <= set(rest):
        return None
    return (
        f"git {sub} runs the programs a repository's config names for diffs (an "
        f"external diff, textconv); add {' '.join(sorted(needed))}"
    )
