"""The host shell policy judges a command as bash will run it; every part must only read."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.tools.shell_policy import check

ALLOWED = [
    "ls -la",
    "cat a.py | grep def | head -5",
    "git status && git diff --no-ext-diff --no-textconv HEAD~1 -- a.py",
    "git log --oneline -n 5 | cat",
    "git log -3 --stat --no-ext-diff --no-textconv --format='%h %s'",
    "git show HEAD:a.py",
    "git show HEAD@{1}:a.py",
    "find . -name '*.py' -type f",
    "find src -maxdepth 2 -type d -print",
    "(cd src && ls) > /dev/null",
    "cat <<EOF\nhello\nEOF",
    "sort -rn a.txt | uniq -c",
    "sort -k2 -t, a.txt",
    "git branch -a",
    "rg -n -g '*.py' 'def main' src",
    "grep -rn 'import os' .",
    "grep -ie main -m 5 -A3 a.py",
    "grep -i -f a.txt a.py",
    "grep -rn '--exclude=*.pyc' --exclude-dir build --include '*.py' main .",
    "c''at a.py",
    "cat 'a.py' \"src/b.py\"",
    "test -f a.py && echo yes",
    "ls 2>&1 | head",
    "wc -l < a.py",
    "grep -rn '/api/v1' src",
    "rg '/usr/bin' src",
    "grep -e '/etc' -r src",
    "cd src && ls",
    "cat <<'EOF'\n`not run` $HOME\nEOF",
    "grep -n 'a[b]' a.py",
    'ls "["x"]" a\\[1] || echo [',
    "cat <<-EOF\n\thi\n\tEOF",
    "find . -name x 2>/dev/null | head",
]
DENIED = [
    ("rm -rf build", "`rm` is not on the read-only allowlist"),
    ("ls && rm x", "`rm`"),
    ("ls; touch x", "`touch`"),
    ("ls || curl http://example.com", "`curl`"),
    ("cat a | sh", "`sh`"),
    ("echo $(rm -rf /)", "substitution"),
    ("echo `rm -rf /`", "substitution"),
    ("wc -l $(git ls-files)", "substitution"),
    ("(rm x)", "`rm`"),
    ("ls > files.txt", "writes a file"),
    ("cat a >> b", "writes a file"),
    ("ls &> out.log", "writes a file"),
    ("find . -delete", "find -delete"),
    ("find . -exec rm {} ;", "find -exec"),
    ("find . -fprint out", "find -fprint"),
    ("git -c core.pager=evil log", "git options"),
    ("git commit -m x", "not a read-only git command"),
    ("git diff --output=/tmp/x", "--output"),
    ("git diff --ext-diff", "--ext-diff"),
    ("git diff HEAD~1", "add --no-ext-diff --no-textconv"),
    ("git log -p", "add --no-ext-diff --no-textconv"),
    ("git show HEAD", "add --no-ext-diff --no-textconv"),
    ("git show :/", "add --no-ext-diff --no-textconv"),  # the newest commit: its patch
    ("git show HEAD^{/fix}", "add --no-ext-diff --no-textconv"),
    ("git show HEAD@{10:00}", "add --no-ext-diff --no-textconv"),  # a reflog date
    ("git show 'HEAD@{2024-01-01 10:00}'", "add --no-ext-diff --no-textconv"),
    ("git blame a.py", "add --no-textconv"),
    ("git log -Sneedle", "add --no-ext-diff --no-textconv"),
    ("git log -c", "add --no-ext-diff --no-textconv"),
    ("git grep -O foo", "git grep -O"),
    ("git branch new-branch", "can change branches"),
    ("python script.py", "runs the project's own code"),
    ("python -m pytest -q", "runs the project's own code"),
    ("pytest --basetemp=/tmp/x", "runs the project's own code"),
    ("FOO=1 ls", "variable assignment"),
    ("for f in *; do rm $f; done", "for statement"),
    ("f() { rm x; }; f", "function definition"),
    ("cat <(rm x)", "substitution"),
    ("sort -o out.txt in.txt", "sort -o"),
    ("uniq in out", "uniq"),
    ("rg --pre ./evil x", "--pre"),
    ("rg --hostname-bin ./evil x", "--hostname-bin"),
    ("$CMD arg", "not a plain word"),
    ("ls $(", "could not be parsed"),
    ("", "empty"),
    # The bypasses seen: quoting, escapes and expansions that bash removes before running.
    ("find D -de''lete", "find -delete"),
    ("find D \\-delete", "find -delete"),
    ('find D "-delete"', "find -delete"),
    ("find D ${PWD:+-delete}", "expansion"),
    ("find D -ex''ec rm {} +", "find -exec"),
    ("git log --out''put=F", "--output"),
    ("git log --\\output=F", "--output"),
    ("sort -uoF x", "sort -o"),
    ("sort -u -o F x", "sort -o"),
    ("ls *.py", "glob"),
    ("cat {a,b}.py", "glob"),
    # A bracket glob the parser splits into pieces: bash matches it to a file named
    # `-delete` (which a worker's container can make) and hands find the option.
    ("find . [-]delete", "glob"),
    ("sort [-]o out.txt a.txt", "glob"),
    ("ls [-]la", "glob"),
    ("ls [' ']x", "glob"),
    # Found by an attacker review: lines bash reads otherwise than the grammar does.
    ("find . 2>/dev/null -delete", "words after a redirection's target"),
    ("cat 2>/dev/null ~/.ssh/id_rsa /etc/passwd", "words after a redirection's target"),
    ("echo ok \\\r\nrm -rf .", "U+000D"),
    ("find . -name x\r# -o -delete", "U+000D"),
    ("find . -name x\x0b# -o -delete", "U+000B"),
    ("find . -name x\u00a0-delete", "U+00A0"),
    ('cat <<E"O"F\nEOF\nrm -rf .\nE"O"F', "here-document whose end line"),
    ("find . [\\x-]delete", "is one word to bash"),
    ("find . -name {x\\},-o,-delete}", "glob"),
    ("cat ~/.ssh/id_rsa", "glob"),
    # Reading outside the workspace, /proc included.
    ("cat /proc/$PPID/environ", "expansion"),
    ("cat /proc/1/environ", "outside the workspace"),
    ("cat /etc/passwd", "outside the workspace"),
    ("cat ../secret", "climbs out"),
    ("grep -f/etc/shadow -r .", "outside the workspace"),
    ("grep --file=/etc/shadow x", "outside the workspace"),
    ("cd / && cat etc/passwd", "outside the workspace"),
    ("cat < /etc/passwd", "outside the workspace"),
    ("cat outlink", "points outside the workspace"),
    # Found by review: what bash does that a naive reading misses.
    ("cat <<EOF\n`touch pwned`\nEOF", "here-document"),
    ("cat <<-EOF\n$(id)\nEOF", "here-document"),
    ("cd && cat .aws/credentials", "leaves the workspace"),
    ("cd -; cat x", "leaves the workspace"),
    ("cat .\\\n./.\\\n./etc/hostname", "backslash-newline"),
    ('cat ".\\\n./etc/hostname"', "backslash-newline"),
    ("cd src && cd up && cat etc/hostname", "points outside the workspace"),
    ("grep -R secret .", "-R"),
    ("grep -if /etc/shadow a.py", "outside the workspace"),  # -f in a group: its file
    ("grep --exclude-from /etc/shadow x .", "outside the workspace"),
    ("grep --file=../secret a.py", "climbs out"),
    ("grep --exclude-f /etc/shadow x .", "outside the workspace"),  # as grep reads it
    ("grep --dereference-rec x .", "--dereference-recursive"),
    ("grep --dereference-recursive x .", "--dereference-recursive"),
    ("rg -L secret", "rg -L"),
    ("rg --follow secret", "--follow"),
    ("diff -r a src", "-r"),
    ("ls -L src", "-L"),
    ("du --dereference src", "--dereference"),
    ("wc --files0-from=list", "--files0-from"),
    ("sha256sum -c sums.txt", "-c"),
    ("echo hi > -", "writes a file"),
]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    (workspace / "a.py").write_text("import os\n")
    (workspace / "outlink").symlink_to("/etc/hostname")
    (workspace / "src" / "up").symlink_to("/")
    return workspace


@pytest.mark.parametrize("command", ALLOWED)
def test_read_only_commands_are_allowed(command: str, ws: Path) -> None:
    verdict = check(command, ws)
    assert verdict.allowed, verdict.reason


@pytest.mark.parametrize(("command", "why"), DENIED)
def test_everything_else_needs_approval_with_a_reason(command: str, why: str, ws: Path) -> None:
    verdict = check(command, ws)
    assert not verdict.allowed
    assert why in verdict.reason, verdict.reason


def test_a_link_inside_a_folder_named_by_cd_is_judged_from_there(ws: Path) -> None:
    (ws / "src" / "link").symlink_to("/etc")
    assert not check("cd src && cat link/hostname", ws).allowed
