"""The commands a host shell may run without asking, and the options each may take:
data for the policy in workers/tools/shell_policy.py, which judges a whole command line
against it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Options:
    """The options a command may take without approval; anything else needs it."""

    short: str = ""
    """Single-letter flags, combinable (`-la`)."""
    short_valued: str = ""
    """Single letters that take a value, attached (`-n5`) or next (`-n 5`)."""
    long: frozenset[str] = frozenset()
    long_valued: frozenset[str] = frozenset()
    """Long options that take a value (`--max-count=5` or `--max-count 5`)."""
    patterns: tuple[str, ...] = ()
    """Regular expressions for whole option words (git's `-U3`, `-S<text>`)."""
    any: bool = False
    """Every option of this command only reads inside what it is given: none writes a
    file, runs a program, or follows links out (those are listed in `refused`)."""
    refused: frozenset[str] = frozenset()
    """With `any`: options that are not read-only after all, as `-R` letters or `--long`."""
    operands: Callable[[list[str]], str | None] | None = None
    """A check on the non-option arguments: why they are unsafe, or None."""
    pattern_first: bool = False
    """The first operand is a pattern, not a path (grep, rg), unless -e or -f gave one."""
    takes_value: frozenset[str] = frozenset()
    """With `any`: options whose next word is their value (a pattern, a count), not a path."""
    reads_file: frozenset[str] = frozenset()
    """With `any`: options whose value is a file the command reads (grep's `-f`), checked
    as a path wherever it is written: `-f x`, `-fx`, `-if x`, `--file=x`, `--file x`."""


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _uniq_operands(operands: list[str]) -> str | None:
    return "uniq with two file names writes the second" if len(operands) > 1 else None


def _no_operands(operands: list[str]) -> str | None:
    return f"unexpected argument {operands[0]!r}" if operands else None


_ANY = Options(any=True)


# Options of otherwise read-only commands that follow links out of what they were given,
# or read a list of other files to open.
_GREP = Options(
    any=True,
    refused=frozenset({"-R", "--dereference-recursive"}),
    pattern_first=True,
    takes_value=frozenset(
        {"-e", "--regexp", "-m", "--max-count", "-A", "-B", "-C", "--context"}
        | {"--exclude", "--exclude-dir", "--include"}  # globs: and `--exclude` is not `-from`
    ),
    reads_file=frozenset({"-f", "--file", "--exclude-from"}),
)


_LISTERS = Options(any=True, refused=frozenset({"-L", "--dereference", "--files0-from"}))


_DIFF = Options(any=True, refused=frozenset({"-r", "--recursive", "-N", "--new-file"}))


_SUMS = Options(any=True, refused=frozenset({"-c", "--check"}))


_WC = Options(any=True, refused=frozenset({"--files0-from"}))


_RG = Options(
    pattern_first=True,
    short="iIsSwxvnNcCloqFUuazHhpP0b",
    short_valued="efgtTABCmdEjMr",
    long=_words(
        "--hidden --no-ignore --ignore-case --smart-case --case-sensitive --word-regexp "
        "--line-regexp --invert-match --line-number --no-line-number --count --count-matches "
        "--files --files-with-matches --files-without-match --only-matching --quiet "
        "--fixed-strings --multiline --no-heading --heading --with-filename --no-filename "
        "--json --vimgrep --stats --null --trim --pretty --type-list --column --no-messages "
        "--unrestricted --text --binary --search-zip --byte-offset --no-config --passthru"
    ),
    long_valued=_words(
        "--regexp --file --glob --iglob --type --type-not --max-count --max-depth --context "
        "--after-context --before-context --sort --sortr --color --colors --encoding "
        "--threads --max-columns --max-filesize --replace"
    ),
)


_SORT = Options(
    short="bdfgiMhnRrsuVcCz",
    short_valued="kt",
    long=_words(
        "--reverse --numeric-sort --unique --ignore-case --human-numeric-sort --version-sort "
        "--stable --check --zero-terminated --general-numeric-sort --month-sort "
        "--dictionary-order --ignore-leading-blanks --random-sort"
    ),
    long_valued=_words("--key --field-separator"),
)


GIT = Options(
    long=_words(
        "--oneline --stat --shortstat --numstat --name-only --name-status --patch --no-patch "
        "--graph --all --decorate --no-decorate --abbrev-commit --reverse --first-parent "
        "--no-merges --merges --follow --cached --staged --no-color --porcelain --short "
        "--branch --long --ignored --word-diff --color-words --ignore-space-change "
        "--ignore-all-space --ignore-blank-lines --minimal --patience --histogram --summary "
        "--raw --no-renames --find-renames --find-copies --exit-code --quiet --check "
        "--show-current --list --tags --always --contains --exact-match --show-toplevel "
        "--show-prefix --git-dir --is-inside-work-tree --symbolic-full-name --verify "
        "--others --modified --deleted --exclude-standard --full-name --line-number --count "
        "--ignore-case --fixed-strings --extended-regexp --perl-regexp --relative --root "
        "--show-email --line-porcelain --incremental --no-ext-diff --no-textconv --remotes "
        "--abbrev-ref --dirstat"
    ),
    long_valued=_words(
        "--unified --date --pretty --format --since --until --after --before --author "
        "--committer --grep --max-count --skip --color --untracked-files --abbrev --diff-filter"
    ),
    patterns=(
        r"-[pqsbnlcioihHEFPwtrazvdmuL]",
        r"-vv",
        r"-[nU]\d+",
        r"-\d+",
        r"-[SG].+",
        r"-[MC]\d*%?",
        r"-L.+",
        r"-e",
    ),
)


GIT_READ = _words("status diff log show blame ls-files rev-parse grep shortlog describe branch")


BRANCH_LISTING = _words("-a -r -v -vv --list --all --show-current --remotes")


# Commands whose every option only reads (GNU coreutils): options need no list.
_READERS = (
    "cat head tail pwd echo true false cut tr cmp stat df which basename dirname realpath "
    "readlink nl test"
)


ALLOWLIST: dict[str, Options] = {
    **{name: _ANY for name in _READERS.split()},
    **{name: _GREP for name in ("grep", "egrep", "fgrep")},
    "ls": _LISTERS,
    "du": _LISTERS,
    "diff": _DIFF,
    "wc": _WC,
    "sha256sum": _SUMS,
    "md5sum": _SUMS,
    "cd": Options(),
    "uniq": Options(any=True, operands=_uniq_operands),
    "sort": _SORT,
    "rg": _RG,
}


# `find` and `git` have grammars of their own: checked by their own functions below.
FIND_FLAGS = _words(
    "-print -print0 -empty -readable -writable -executable -true -false -depth -prune "
    "-quit -not ! -a -and -o -or ( ) -xdev -mount -nowarn -ignore_readdir_race -daystart"
)


FIND_VALUED = _words(
    "-name -iname -path -ipath -wholename -iwholename -regex -iregex -regextype -type "
    "-xtype -maxdepth -mindepth -size -mtime -mmin -atime -amin -ctime -cmin -newer "
    "-anewer -cnewer -user -group -uid -gid -perm -links -inum -samefile -printf -used "
    "-fstype -lname -ilname"
)


FIND_PATH_VALUES = _words("-newer -anewer -cnewer -samefile")
