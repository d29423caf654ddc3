"""Every way out of the workspace is refused with a message, and nothing is touched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import RunTool


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("host secret\n")
    return folder


@pytest.mark.parametrize(
    "path", ["../outside/secret.txt", "/etc/passwd", "sub/../../outside/secret.txt"]
)
def test_paths_outside_are_refused(run_tool: RunTool, outside: Path, path: str) -> None:
    result = run_tool("read_file", path=path)
    assert result.is_error and "outside the workspace" in result.output
    assert "host secret" not in result.output


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
    assert (outside / "secret.txt").read_text() == "host secret\n"


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
    assert "host secret" not in grep.output
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
    "path", [".git/hooks/pre-commit", ".gaffer/profiles/coder.toml", "./.git/config"]
)
def test_git_and_gaffer_folders_are_not_writable_by_tools(
    run_tool: RunTool, workspace: Path, path: str
) -> None:
    (workspace / ".git" / "hooks").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n")
    result = run_tool("write_file", path=path, content="#!/bin/sh\necho pwned\n")
    assert result.is_error and "agents may not write to" in result.output
    edit = run_tool("edit_file", path=".git/config", old_text="[core]", new_text="[evil]")
    assert edit.is_error and (workspace / ".git" / "config").read_text() == "[core]\n"
    assert run_tool("read_file", path=".git/config").output.startswith("[core]")
