"""The host shell policy parses commands; every segment must be read-only."""

from __future__ import annotations

import pytest

from workers.tools.shell_policy import check

ALLOWED = [
    "ls -la",
    "cat a.py | grep def | head -5",
    "git status && git diff HEAD~1 -- a.py",
    "git log --oneline -n 5 | cat",
    "find . -name '*.py' -type f",
    "python -m pytest -q tests/",
    "python3 -m pytest -x",
    "pytest -q 2>&1 | tail -20",
    "(cd src && ls) > /dev/null",
    "wc -l $(git ls-files)",
    "cat <<EOF\nhello\nEOF",
    "sort a.txt | uniq -c",
    "git branch -a",
]
DENIED = [
    ("rm -rf build", "`rm` is not on the read-only allowlist"),
    ("ls && rm x", "`rm`"),
    ("ls; touch x", "`touch`"),
    ("ls || curl http://example.com", "`curl`"),
    ("cat a | sh", "`sh`"),
    ("echo $(rm -rf /)", "`rm`"),
    ("echo `rm -rf /`", "`rm`"),
    ("(rm x)", "`rm`"),
    ("ls > files.txt", "writes a file"),
    ("cat a >> b", "writes a file"),
    ("ls &> out.log", "writes a file"),
    ("find . -delete", "find -delete"),
    ("find . -exec rm {} ;", "find -exec"),
    ("git -c core.pager=evil log", "git options"),
    ("git commit -m x", "not a read-only git command"),
    ("git diff --output=/tmp/x", "writes files"),
    ("git branch new-branch", "can change branches"),
    ("python script.py", "python -m pytest"),
    ("FOO=1 ls", "variable assignment"),
    ("for f in *; do rm $f; done", "for statement"),
    ("f() { rm x; }; f", "function definition"),
    ("cat <(rm x)", "process substitution"),
    ("sort -o out.txt in.txt", "sort -o"),
    ("uniq in out", "uniq"),
    ("rg --pre ./evil x", "--pre"),
    ("$CMD arg", "not a plain word"),
    ("ls $(", "could not be parsed"),
    ("", "empty"),
]


@pytest.mark.parametrize("command", ALLOWED)
def test_read_only_commands_are_allowed(command: str) -> None:
    verdict = check(command)
    assert verdict.allowed, verdict.reason


@pytest.mark.parametrize(("command", "why"), DENIED)
def test_everything_else_needs_approval_with_a_reason(command: str, why: str) -> None:
    verdict = check(command)
    assert not verdict.allowed
    assert why in verdict.reason
