"""Every way out of the workspace is refused with a message, and nothing is touched."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import SECRET, RunTool
from workers import state
from workers.tools import git_paths, outputs
from workers.tools.base import ToolContext, ToolError
from workers.tools.workspace import resolve_for_write


@pytest.mark.parametrize(
    "path", ["../outside/secret.txt", "/etc/passwd", "sub/../../outside/secret.txt"]
)
def test_paths_outside_are_refused(run_tool: RunTool, outside: Path, path: str) -> None:
    result = run_tool("read_file", path=path)
    assert result.is_error and "outside the workspace" in result.output
    assert SECRET.strip() not in result.output


def test_proc_self_root_is_refused(run_tool: RunTool) -> None:
    result = run_tool("read_file", path="/proc/self/root/etc/passwd")
    assert result.is_error and "outside the workspace" in result.output


def test_symlink_to_a_host_file_is_refused_for_read_and_write(
    run_tool: RunTool, workspace: Path, outside: Path
) -> None:
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    read = run_tool("read_file", path="link.txt")
    assert read.is_error and "symlink that points outside" in read.output
    write = run_tool("write_file", path="link.txt", content="pwned")
    assert write.is_error
    edit = run_tool("edit_file", path="link.txt", old_text="host", new_text="pwned")
    assert edit.is_error
    assert (outside / "secret.txt").read_text() == SECRET


def test_symlink_to_a_host_folder_is_refused(
    run_tool: RunTool, workspace: Path, outside: Path
) -> None:
    (workspace / "escape").symlink_to(outside)
    assert run_tool("list_dir", path="escape").is_error
    write = run_tool("write_file", path="escape/new.txt", content="x")
    assert write.is_error and "symlink" in write.output
    assert not (outside / "new.txt").exists()
    assert run_tool("grep", pattern="secret", path="escape").is_error


def test_search_never_follows_a_symlink_out(
    run_tool: RunTool, workspace: Path, outside: Path
) -> None:
    (workspace / "escape").symlink_to(outside)
    (workspace / "linked.txt").symlink_to(outside / "secret.txt")
    (workspace / "own.txt").write_text("no secrets here\n")
    grep = run_tool("grep", pattern="secret")
    assert SECRET.strip() not in grep.output
    assert "own.txt" in grep.output
    found = run_tool("find_files", pattern="*.txt")
    assert "secret.txt" not in found.output


def test_a_symlink_inside_the_workspace_is_fine(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "real.txt").write_text("inside\n")
    (workspace / "alias.txt").symlink_to(workspace / "real.txt")
    assert run_tool("read_file", path="alias.txt").output.startswith("inside")


def test_device_files_and_fifos_are_refused(run_tool: RunTool, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    result = run_tool("read_file", path="pipe")
    assert result.is_error and "not a regular file" in result.output


def test_nul_in_path_is_refused(run_tool: RunTool) -> None:
    result = run_tool("read_file", path="a\x00b")
    assert result.is_error and "NUL" in result.output


@pytest.mark.parametrize(
    "path",
    [
        ".git/hooks/pre-commit",
        ".gaffer/profiles/coder.toml",
        "./.git/config",
        "sub/.git/hooks/pre-commit",
        "vendor/lib/.git/config",
        "pkg/.GIT/config",
        "sub/.git",
        ".mcp.json",
        ".venv/bin/activate",
        ".venv/BIN/pytest",  # a case-insensitive file system's .venv/bin/pytest
        ".venv/lib/python3.11/site-packages/pytest/__init__.py",
        "web/node_modules/.bin/jest",
        "web/Node_Modules/jest/bin/jest.js",
        "src/evil.pth",
        "sitecustomize.py",
        "src/__pycache__/app.cpython-311.PYC",
        "newvenv/pyvenv.cfg",  # bin/ written first, then what makes it a venv
    ],
)
def test_what_the_host_runs_on_its_own_is_not_writable_by_tools(
    run_tool: RunTool, workspace: Path, path: str
) -> None:
    (workspace / ".venv" / "bin").mkdir(parents=True)
    (workspace / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (workspace / ".git" / "hooks").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n")
    (workspace / "sub" / ".git" / "hooks").mkdir(parents=True)
    result = run_tool("write_file", path=path, content="#!/bin/sh\necho pwned\n")
    assert result.is_error and "agents may not write there" in result.output
    assert not (workspace / path).is_file() or path == "./.git/config"
    edit = run_tool("edit_file", path=".git/config", old_text="[core]", new_text="[evil]")
    assert edit.is_error and (workspace / ".git" / "config").read_text() == "[core]\n"
    assert run_tool("read_file", path=".git/config").output.startswith("[core]")


def git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "safe.directory=*", *args], cwd=folder, check=True, capture_output=True
    )


@pytest.mark.parametrize("with_git", [True, False], ids=["git", "no-git-installed"])
@pytest.mark.parametrize(
    ("hooks_path", "written", "protected"),
    [
        (".husky/_", ".husky/pre-commit", True),  # husky 9: _/h runs the hooks one level up
        (".husky/_", ".husky/_/h", True),
        ("tools/hooks", "tools/hooks/pre-push", True),
        ("tools/hooks", "tools/build.sh", False),
        ("/somewhere/else", "somewhere/else/x", False),
    ],
)
def test_the_core_hooks_path_target_is_not_writable_by_tools(
    run_tool: RunTool,
    workspace: Path,
    hooks_path: str,
    written: str,
    protected: bool,
    with_git: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    git(workspace, "init", "-q")
    git(workspace, "config", "core.hooksPath", hooks_path)
    if not with_git:
        monkeypatch.setattr(git_paths.shutil, "which", lambda _name: None)
    result = run_tool("write_file", path=written, content="#!/bin/sh\nid\n")
    assert result.is_error == protected, result.output
    if protected:
        assert "runs as hooks" in result.output


def test_hooks_of_the_repository_above_a_workspace_and_included_config_are_protected(
    run_tool: RunTool, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    workspace = repo / "frontend"
    (workspace / ".husky" / "_").mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "core.hooksPath", "frontend/.husky/_")
    git(repo, "config", "include.path", "../frontend/.gitconfig")
    (workspace / ".gitconfig").write_text("[user]\n\tname = x\n")
    context = ToolContext(workspace)
    for path in (".husky/pre-commit", ".gitconfig"):
        with pytest.raises(ToolError, match="runs as hooks"):
            resolve_for_write(context.workspace, path)
    resolve_for_write(context.workspace, "src/app.ts")


def test_a_symlinked_hooks_folder_is_protected_through_its_target(
    run_tool: RunTool, workspace: Path
) -> None:
    (workspace / "tools" / "hooks").mkdir(parents=True)
    (workspace / ".husky").symlink_to("tools/hooks")
    git(workspace, "init", "-q")
    git(workspace, "config", "core.hooksPath", ".husky")
    result = run_tool("write_file", path="tools/hooks/pre-commit", content="id\n")
    assert result.is_error and "runs as hooks" in result.output


def test_a_folder_git_would_take_for_a_repository_cannot_be_made(
    run_tool: RunTool, workspace: Path
) -> None:
    (workspace / "evil" / "objects").mkdir(parents=True)
    assert not run_tool("write_file", path="evil/HEAD", content="ref: refs/heads/main\n").is_error
    made = run_tool("write_file", path="evil/refs/heads/main", content="x\n")
    assert made.is_error and "git would take for a repository" in made.output
    (workspace / "evil" / "refs").mkdir()
    config = run_tool("write_file", path="evil/config", content="[core]\n\tfsmonitor = id\n")
    assert config.is_error and "git would take for a repository" in config.output


def test_the_user_s_own_config_is_protected_when_the_workspace_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".config" / "gaffer" / "tools").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    for path in (".config/gaffer/tools/evil.py", ".config/gaffer/trusted.json", ".gitconfig"):
        with pytest.raises(ToolError, match="runs as hooks"):
            resolve_for_write(home, path)


def test_a_hard_linked_file_is_refused_for_writes_but_readable(
    run_tool: RunTool, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "cache-file.js"
    outside.write_text("module.exports = 1\n")
    os.link(outside, workspace / "dep.js")  # as pnpm and uv link their caches in
    for result in (
        run_tool("write_file", path="dep.js", content="pwned\n"),
        run_tool("edit_file", path="dep.js", old_text="1", new_text="2"),
    ):
        assert result.is_error and "hard links" in result.output
    assert outside.read_text() == "module.exports = 1\n"
    assert run_tool("read_file", path="dep.js").output.startswith("module.exports")


def test_a_link_planted_in_the_shell_output_folder_is_never_followed(
    run_tool: RunTool, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Even a planter who guessed every name is refused: the host only creates new files.
    names = iter(["aaaa", "aaaa", "bbbb"])
    monkeypatch.setattr(outputs.secrets, "token_hex", lambda _n: next(names))
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    # A container writes its own output folder; say one could plant links under every
    # name the host's next outputs could take.
    shell_dir = state.workspace_dir(workspace, state.OUTPUT)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (shell_dir / f"{stamp}-aaaa.log").symlink_to(victim)
    result = run_tool("run_shell", approve=True, command="seq 1 20000; echo overwritten")
    assert "overwritten" in result.output and not result.is_error
    assert victim.read_text() == "precious\n"
    saved = result.facts.output_file
    assert saved and saved.endswith("-bbbb.log") and not saved.startswith(str(workspace))
    page = run_tool("read_file", path=saved, offset=19999)
    assert not page.is_error and page.output.startswith("19999\n20000\noverwritten")
    link = run_tool("read_file", path=str(shell_dir / f"{stamp}-aaaa.log"))
    assert link.is_error and "precious" not in link.output
    other = run_tool("read_file", path=str(shell_dir.parent / "workspace"))
    assert other.is_error and "outside the workspace" in other.output


def test_a_gaffer_folder_that_links_out_is_never_written_through(
    run_tool: RunTool, workspace: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / ".gaffer").symlink_to(elsewhere)  # shipped by a hostile repository
    result = run_tool("run_shell", approve=True, command="seq 1 20000")
    assert not result.is_error and result.facts.output_file
    assert list(elsewhere.iterdir()) == []
