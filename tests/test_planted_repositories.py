"""A worker cannot make a folder one the user's git uses, nor write a file git would read
as config: git's own test for a repository (HEAD with a `commondir`) and includes whose
target does not exist yet. Each attack is followed by the user's next `git`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import RunTool
from tests.docker_support import require_docker, user_workspace
from tests.fake_openai import Reply
from tests.helpers import gaffer_replying, shell_reply

FSMONITOR = '[core]\n\tfsmonitor = "touch {mark}; false"\n'


def git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git as the user runs it in their own checkout."""
    return subprocess.run(
        ["git", "-c", "safe.directory=*", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
        env={"GIT_PAGER": "cat", "PATH": "/usr/bin:/bin", "HOME": str(folder)},
    )


def repository(ws: Path) -> Path:
    git(ws, "init", "-q")
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("x = 1\n")
    # The repository's own config names an include that is not there yet.
    with (ws / ".git" / "config").open("a") as config:
        config.write("[include]\n\tpath = ../team.gitconfig\n")
        config.write('[includeIf "gitdir:**"]\n\tpath = ../local.gitconfig\n')
    return ws


def test_the_file_tools_refuse_a_commondir_repository_and_a_missing_include(
    run_tool: RunTool, workspace: Path
) -> None:
    repository(workspace)
    head = run_tool("write_file", path="src/HEAD", content="ref: refs/heads/main\n")
    assert not head.is_error  # a file named HEAD alone is no repository
    common = run_tool("write_file", path="src/commondir", content="../.git\n")
    assert common.is_error and "git would take for a repository" in common.output
    for target in ("team.gitconfig", "local.gitconfig"):
        made = run_tool("write_file", path=target, content=FSMONITOR.format(mark="PWNED"))
        assert made.is_error and "git or gaffer reads as configuration" in made.output
    assert not (workspace / "src" / "commondir").exists()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    require_docker()
    (tmp_path / "ws").mkdir()
    return user_workspace(repository(tmp_path / "ws"))


def test_a_container_s_commondir_repository_and_include_are_taken_out(ws: Path) -> None:
    plant = [
        "printf 'ref: refs/heads/main\\n' > src/HEAD && printf '../.git\\n' > src/commondir",
        f"printf '{FSMONITOR.format(mark='../PWNED-include')}' > team.gitconfig",
        f"printf '{FSMONITOR.format(mark='../PWNED-if')}' > local.gitconfig",
    ]
    replies = [*(shell_reply(c) for c in plant), Reply(text="done")]
    done, _ = gaffer_replying(ws, "run", "--profile", "coder", "--no-verify", "go", replies=replies)
    assert done.returncode == 0, done.stderr
    [log] = sorted((ws.parent / "logs").glob("*.jsonl"))
    moved = {
        r["path"]
        for line in log.read_text().splitlines()
        if (r := json.loads(line)).get("action") == "quarantined"
    }
    assert moved == {"src/HEAD", "src/commondir", "team.gitconfig", "local.gitconfig"}
    assert (ws / "src" / "app.py").exists(), "the project's own files stay"
    # The user's next git, in the folder and at the top.
    git(ws, "status")
    git(ws, "-c", "core.pager=touch PWNED-pager", "-p", "diff")
    assert not list(ws.glob("PWNED*")) and not list(ws.parent.glob("PWNED*"))


def test_host_git_diff_never_runs_a_repository_s_diff_programs(
    run_tool: RunTool, workspace: Path
) -> None:
    git(workspace, "init", "-q")
    (workspace / "a.py").write_text("x = 1\n")
    (workspace / ".gitattributes").write_text("*.py diff=evil\n")
    for key, value in [
        ("diff.evil.textconv", f"touch {workspace}/PWNED-textconv; cat"),
        ("diff.external", f"touch {workspace}/PWNED-external"),
        ("user.email", "u@x"),
        ("user.name", "u"),
    ]:
        git(workspace, "config", key, value)
    git(workspace, "add", ".")
    git(workspace, "commit", "-qm", "start")
    (workspace / "a.py").write_text("x = 2\n")
    plain = run_tool("run_shell", command="git diff")
    assert plain.is_error and "add --no-ext-diff --no-textconv" in plain.output
    for command in (
        "git diff --no-ext-diff --no-textconv",
        "git log -p --no-ext-diff --no-textconv",
    ):
        result = run_tool("run_shell", command=command)
        assert not result.is_error, result.output
    assert "+x = 2" in run_tool("run_shell", command="git diff --no-ext-diff --no-textconv").output
    assert not list(workspace.glob("PWNED*"))
    # A clean filter runs on a plain `git status`: with one named, every git is asked.
    git(workspace, "config", "filter.evil.clean", f"touch {workspace}/PWNED-filter; cat")
    status = run_tool("run_shell", command="git status")
    assert status.is_error and "filter.evil.clean" in status.output
    assert not list(workspace.glob("PWNED*"))
