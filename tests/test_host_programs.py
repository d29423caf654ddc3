"""Nothing gaffer starts on the host runs code from the workspace: a repository that
plants a marker writer under every name a program might pick up (Python modules and
start-up files, a `node_modules/.bin` program, a `.ripgreprc`, a git fsmonitor) sees none
of them run, whichever gaffer command the user types in it."""

from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from supervisor.local import server, store
from workers import host_programs
from workers.changes.merging import _merge_file
from workers.extensions.mcp_servers import ServerConfig
from workers.tools.base import ToolContext
from workers.tools.git_paths import run_git
from workers.tools.search import GrepArgs, _python_grep, grep, ripgrep

from .conftest import must_run_here

ROOT = Path(__file__).resolve().parent.parent
GAFFER = Path(sys.executable).parent / "gaffer"
PLANTED_MODULES = (
    "typing",
    "json",
    "encodings",
    "pip",
    "xllamacpp",
    "sitecustomize",
    "usercustomize",
    "site",
    "re",
    "workers",
)
HOST_PROGRAMS = ("git", "rg", "python3", "pip", "cat", "bash", "xdg-open", "node", "npx")


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace that writes a marker into `marks/` whenever any of its files runs; the
    test runs from inside it, with its command folder first on PATH (as direnv or npm
    would put it) and git and ripgrep told to read its config."""
    ws = tmp_path / "ws"
    marks = tmp_path / "marks"
    marks.mkdir()
    (ws / "node_modules" / ".bin").mkdir(parents=True)
    for name in PLANTED_MODULES:
        # posix, not open(): `encodings` is imported before Python has its io.
        code = f"import posix\nposix.close(posix.open({str(marks / name)!r}, 0o101, 0o644))\n"
        target = ws / name / "__init__.py" if name == "workers" else ws / f"{name}.py"
        target.parent.mkdir(exist_ok=True)
        target.write_text(code)
    runner = f"#!/bin/sh\ntouch {marks}/program-$(basename $0)\n"
    for program in HOST_PROGRAMS:
        _executable(ws / "node_modules" / ".bin" / program, runner)
    _executable(ws / "fsmonitor.sh", f"#!/bin/sh\ntouch {marks}/fsmonitor\n")
    venv = ws / ".venv" / "lib" / "python3.11" / "site-packages"
    venv.mkdir(parents=True)
    (venv / "planted.pth").write_text(f"import os; open({str(marks / 'pth')!r}, 'w').close()\n")
    (ws / ".ripgreprc").write_text(f"--pre={ws / 'fsmonitor.sh'}\n")
    assert subprocess.run(["git", "init", "-q", str(ws)], check=False).returncode == 0
    with (ws / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = {ws / 'fsmonitor.sh'}\n")
    (ws / "hello.txt").write_text("hello\n")
    monkeypatch.chdir(ws)
    path = os.pathsep.join(["node_modules/.bin", str(ws / "node_modules" / ".bin")])
    monkeypatch.setenv("PATH", path + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("RIPGREP_CONFIG_PATH", str(ws / ".ripgreprc"))
    monkeypatch.setenv("PYTHONPATH", str(ws))
    monkeypatch.setenv("GIT_DIR", str(ws / ".git"))
    return ws


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def marks(ws: Path) -> list[str]:
    return sorted(os.listdir(ws.parent / "marks"))


def test_the_planted_files_would_run_if_started_the_old_way(planted: Path) -> None:
    """The attack is real: a plain `python -m` or a PATH lookup from the workspace runs it."""
    subprocess.run([sys.executable, "-m", "workers.tools.python_grep"], capture_output=True)
    subprocess.run(["git", "--version"], check=False, capture_output=True)
    assert {"encodings", "program-git"} <= set(marks(planted))


def test_gaffers_own_modules_run_isolated(planted: Path) -> None:
    done = host_programs.run(_python_grep(planted, planted, GrepArgs(pattern="hello")), timeout=60)
    assert done.returncode == 0, done.stderr
    assert b"hello.txt" in done.stdout
    done = host_programs.run(host_programs.python("-c", "import sys; print(sys.path)"), timeout=60)
    assert str(planted) not in done.stdout.decode() and "''" not in done.stdout.decode()
    assert marks(planted) == []


def test_git_runs_from_outside_with_the_safe_config(planted: Path) -> None:
    done = run_git(planted, "status", "--porcelain")
    assert done is not None and done.returncode == 0, done
    assert b"hello.txt" in done.stdout
    merged, clean = _merge_file(b"a\nb\n", b"a\nb\n", b"a\nc\n")
    assert (merged, clean) == (b"a\nc\n", True)
    assert marks(planted) == []


def test_the_grep_tool_reads_no_ripgreprc(planted: Path) -> None:
    if ripgrep() is None:
        must_run_here("ripgrep comes with the package")
    result = grep(ToolContext(planted), GrepArgs(pattern="hello"))
    assert "hello.txt" in result.output
    assert marks(planted) == []


def test_the_local_server_imports_nothing_from_the_workspace(
    planted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """structlog's own source ships `typing.py`: surveying it used to kill the server."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = dataclasses.replace(store.QWEN_CODER_1_5B, filename="not-a-model.gguf")
    store.cache_dir().mkdir(parents=True)
    store.model_path(model).write_bytes(b"not a model\n")
    with pytest.raises(server.LocalUnavailable, match="exited with code"):
        server.start(model)
    log = (store.cache_dir().parent / "local-server.log").read_text()
    assert "xllamacpp" in log  # it got as far as loading the model, from site-packages
    assert marks(planted) == []


def test_pip_runs_isolated(planted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = tmp_path / "index"
    index.mkdir()
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", index.as_uri())
    with pytest.raises(store.PullError, match="failed"):
        store.pip_download(["gaffer-no-such-package==1.0"], tmp_path / "wheels")
    assert marks(planted) == []


def test_a_program_is_never_found_in_the_workspace(planted: Path) -> None:
    env = host_programs.environment()
    for program in ("git", "cat"):
        found = host_programs.resolved([program], env, str(planted))[0]
        assert not found.startswith(str(planted)) and os.path.isabs(found)
    with pytest.raises(FileNotFoundError, match="not installed"):
        host_programs.resolved(["gaffer-no-such-program"], env, str(planted))


def test_an_mcp_server_gets_only_plain_variables_and_its_own(
    planted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-this")
    config = ServerConfig(name="s", command="cat", env={"TOKEN_IT_NEEDS": "x"})
    env = host_programs.environment(values=config.env)
    assert env["TOKEN_IT_NEEDS"] == "x"
    assert not {"OPENAI_API_KEY", "PYTHONPATH", "GIT_DIR", "RIPGREP_CONFIG_PATH"} & env.keys()
    assert all(os.path.isabs(entry) for entry in env["PATH"].split(os.pathsep))


def test_the_environment_keeps_only_what_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-this")
    monkeypatch.setenv("LD_PRELOAD", "/tmp/x.so")
    env = host_programs.environment("OPENAI_API_KEY")
    assert env["OPENAI_API_KEY"] == "sk-never-this" and "LD_PRELOAD" not in env
    assert "OPENAI_API_KEY" not in host_programs.environment()


# Every command a user may type in the workspace, with no endpoint and no model.
COMMANDS = (
    ["run", "what is here?"],
    ["local", "pull"],
    ["local", "start"],
    ["logs"],
    ["stats"],
    ["diff"],
    ["undo"],
    ["redo"],
    ["view"],
    ["trust"],
    ["profiles"],
    ["sandbox", "doctor"],
    ["chat"],
    ["--help"],
)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_no_gaffer_command_runs_a_workspace_file(
    planted: Path, tmp_path: Path, command: list[str]
) -> None:
    # What the user has: the planted PATH and RIPGREP_CONFIG_PATH, but Python as usual.
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "PYTHONPATH")}
    env.update(
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL=(tmp_path / "marks").as_uri(),
        BROWSER="xdg-open",
        GAFFER_LOCAL_FETCH_TIMEOUT="5",
    )
    done = subprocess.run(
        [str(GAFFER), *command],
        cwd=planted,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert marks(planted) == [], done.stderr.decode()[-2000:]


def test_a_python_server_started_in_the_workspace_imports_nothing_from_it(
    planted: Path,
) -> None:
    """An MCP server a workspace's config names runs where its files are, and may be
    `python -m something`: the child Python never puts that folder on its path."""
    env = host_programs.environment()
    argv = host_programs.resolved(["python3", "-m", "json.tool", "--help"], env, str(planted))
    done = host_programs.run(argv, cwd=planted, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert marks(planted) == []


def test_a_working_folder_removed_under_gaffer_still_lets_programs_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    done = host_programs.run(["true"], timeout=30)
    assert done.returncode == 0
