"""grep (ripgrep and the Python fallback) and find_files."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import RunTool, must_run_here
from workers.tools import search
from workers.tools.base import CHARS_PER_TOKEN, RESULT_SHARE, ToolContext, result_chars


@pytest.fixture(params=["python", "ripgrep"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setattr(search, "ripgrep", lambda: None)
    elif search.ripgrep() is None:
        must_run_here("ripgrep is not installed here; `make install` brings its wheel")
    return str(request.param)


@pytest.fixture
def project(workspace: Path) -> Path:
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("def main():\n    return helper()\n")
    (workspace / "src" / "util.py").write_text("def helper():\n    return 1\n")
    (workspace / "notes.md").write_text("main idea\n")
    (workspace / "node_modules").mkdir()
    (workspace / "node_modules" / "dep.py").write_text("def main(): pass\n")
    (workspace / "blob.bin").write_bytes(b"def main\x00\x01")
    return workspace


def test_grep_finds_matches_with_lines(run_tool: RunTool, project: Path, engine: str) -> None:
    result = run_tool("grep", pattern=r"def \w+\(")
    lines = sorted(result.output.splitlines())
    assert lines == ["src/app.py:1:def main():", "src/util.py:1:def helper():"]
    assert result.summary == "2 matches"


def test_grep_glob_and_path(run_tool: RunTool, project: Path, engine: str) -> None:
    assert run_tool("grep", pattern="main", glob="*.md").output == "notes.md:1:main idea"
    assert run_tool("grep", pattern="helper", path="src/util.py").output.endswith("def helper():")


def test_grep_caps_with_a_count(run_tool: RunTool, workspace: Path, engine: str) -> None:
    (workspace / "many.txt").write_text("hit\n" * (search.MAX_MATCHES + 50))
    result = run_tool("grep", pattern="hit")
    lines = result.output.splitlines()
    assert lines[0] == "250 matches in 1 file; the first ones:"
    assert lines[1:-1] == [f"many.txt:{n}:hit" for n in range(1, search.MAX_MATCHES + 1)]
    assert lines[-1].startswith("[narrow the pattern")


def test_a_300_match_grep_fits_its_share_of_a_16k_window(workspace: Path, engine: str) -> None:
    """The demo's failure: `grep gaffer .` gave 280 matches, 22,000 tokens, into 16,384."""
    for n in range(30):
        lines = [f"gaffer line {i} of module {n}: " + "x" * 60 for i in range(10)]
        (workspace / f"mod{n:02}.py").write_text("\n".join(lines) + "\n")
    (workspace / "big.py").write_text("gaffer\n" * 100)
    budget = result_chars(16_384)
    context = ToolContext(workspace, max_output_chars=budget)
    result = search.grep(context, search.GrepArgs(pattern="gaffer"))
    assert len(result.output) <= budget
    assert len(result.output) / CHARS_PER_TOKEN <= 16_384 * RESULT_SHARE
    lines = result.output.splitlines()
    assert lines[0] == "400 matches in 31 files; matches per file, most first:"
    assert lines[1] == "  big.py: 100"
    firsts = [line for line in lines if ":1:" in line or " 0 of module" in line]
    assert len({line.split(":")[0] for line in firsts}) >= 20, "the first match of most files"
    assert lines[-1].startswith("[narrow the pattern")
    assert result.summary == "400 matches"


def test_grep_bad_regex_and_no_match(run_tool: RunTool, project: Path, engine: str) -> None:
    bad = run_tool("grep", pattern="(unclosed")
    assert bad.is_error and "invalid regular expression" in bad.output
    assert run_tool("grep", pattern="zzz_nothing").output.startswith("no matches")


def test_find_files_by_name_and_by_path(run_tool: RunTool, project: Path) -> None:
    assert run_tool("find_files", pattern="*.py").output.splitlines() == [
        "src/app.py",
        "src/util.py",
    ]
    assert run_tool("find_files", pattern="src/**/util.py").output == "src/util.py"
    assert run_tool("find_files", pattern="**/*.md").output == "notes.md"
    assert run_tool("find_files", pattern="*.rs").output.startswith("no files match")


def test_find_files_takes_a_bare_word_or_alternatives_as_small_models_write_them(
    run_tool: RunTool, project: Path
) -> None:
    """The demo's explorer called find_files("top|level|agent|loop|worker|sandbox")
    twelve times, finding nothing each time: a regex where a glob goes."""
    assert run_tool("find_files", pattern="util").output == "src/util.py"
    found = run_tool("find_files", pattern="app|notes|zzz").output.splitlines()
    assert sorted(found) == ["notes.md", "src/app.py"]
    assert run_tool("find_files", pattern="app.py").output == "src/app.py", "a name stays exact"
    assert run_tool("find_files", pattern="*.md|*.rs").output == "notes.md"


def test_a_bare_word_finds_the_files_of_a_folder_named_with_it(
    run_tool: RunTool, workspace: Path
) -> None:
    """The demo's explorer asked find_files("sandbox") under `workers` and was told "no
    files": the sandbox is the folder `workers/sandbox/`. A bare word matches any name
    on the path under the folder searched; a glob still matches names only."""
    (workspace / "workers" / "sandbox").mkdir(parents=True)
    (workspace / "workers" / "sandbox" / "docker.py").write_text("")
    (workspace / "workers" / "loop.py").write_text("")
    (workspace / "bench").mkdir()
    (workspace / "bench" / "sandbox.py").write_text("")
    found = run_tool("find_files", pattern="sandbox", path="workers").output
    assert found == "workers/sandbox/docker.py"
    both = run_tool("find_files", pattern="sandbox|loop").output.splitlines()
    assert both == ["bench/sandbox.py", "workers/loop.py", "workers/sandbox/docker.py"]
    (workspace / "a_sandbox").mkdir()
    (workspace / "a_sandbox" / "x.py").write_text("")
    named_first = run_tool("find_files", pattern="sandbox").output.splitlines()
    assert named_first[0] == "bench/sandbox.py", "a file named with it before a folder's files"
    assert run_tool("find_files", pattern="sandbox*").output == "bench/sandbox.py"
    assert run_tool("find_files", pattern="*.py", path="workers/sandbox").output == (
        "workers/sandbox/docker.py"
    )


def test_find_files_caps_with_a_count(run_tool: RunTool, workspace: Path) -> None:
    for i in range(search.MAX_FILES + 7):
        (workspace / f"f{i}.txt").write_text("")
    result = run_tool("find_files", pattern="*.txt")
    assert "7 more files not shown" in result.output


def test_glob_regex() -> None:
    assert search.glob_regex("a/*.py").fullmatch("a/b.py")
    assert not search.glob_regex("a/*.py").fullmatch("a/b/c.py")
    assert search.glob_regex("a/**/c.py").fullmatch("a/c.py")
    assert search.glob_regex("a/**/c.py").fullmatch("a/b/x/c.py")


def test_a_search_that_finds_nothing_points_at_files_named_like_it(
    run_tool: RunTool, workspace: Path, engine: str
) -> None:
    (workspace / "workers" / "sandbox").mkdir(parents=True)
    (workspace / "workers" / "loop.py").write_text("def run(): ...\n")
    (workspace / "workers" / "sandbox" / "docker.py").write_text("x = 1\n")
    loop = run_tool("grep", pattern="agent_loop")
    assert loop.output.startswith("no matches for 'agent_loop'")
    assert "names hold 'agent' or 'loop': workers/loop.py" in loop.output
    sandboxed = run_tool("grep", pattern="how is a worker sandboxed")
    assert "workers/sandbox/" in sandboxed.output and "workers/" in sandboxed.output
    assert run_tool("grep", pattern="zzqx").output == "no matches for 'zzqx'"


def test_a_pattern_that_backtracks_for_ever_is_stopped_at_the_deadline(
    workspace: Path, engine: str
) -> None:
    (workspace / "evil.txt").write_text("a" * 40 + "!\n")
    context = ToolContext(workspace, deadline=time.monotonic() + 2)
    started = time.monotonic()
    result = search.grep(context, search.GrepArgs(pattern="(a+)+$"))
    assert time.monotonic() - started < 5
    if engine == "python":  # ripgrep's engine does not backtrack: it just finds nothing
        assert "stopped at its time limit" in result.output and "(a+)+" in result.output


def test_a_file_too_big_to_search_is_named_not_dropped(workspace: Path) -> None:
    (workspace / "huge.log").write_bytes(b"needle\n" * (search.MAX_SEARCHED_FILE_BYTES // 7 + 1))
    (workspace / "small.txt").write_text("needle\n")
    for engine in ("python", "ripgrep"):
        with pytest.MonkeyPatch.context() as patch:
            if engine == "python":
                patch.setattr(search, "ripgrep", lambda: None)
            result = search.grep(ToolContext(workspace), search.GrepArgs(pattern="needle"))
        assert "small.txt:1:needle" in result.output
        if engine == "python":
            assert "not searched, over 10 MB: huge.log" in result.output


def test_the_fallback_never_runs_the_repository_s_own_modules(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m workers.tools.python_grep` in a workspace that ships a `workers`
    package of its own must still run gaffer's, and a name that is not UTF-8 is found."""
    import os

    monkeypatch.setattr(search, "ripgrep", lambda: None)
    (workspace / "workers" / "tools").mkdir(parents=True)
    (workspace / "workers" / "__init__.py").write_text("print('PWNED')\nraise SystemExit(0)\n")
    (workspace / os.fsdecode(b"caf\xe9.txt")).write_text("needle\n")
    result = search.grep(ToolContext(workspace), search.GrepArgs(pattern="needle"))
    assert "PWNED" not in result.output, "the repository's package printed nothing: it never ran"
    assert os.fsdecode(b"caf\xe9.txt") + ":1:needle" in result.output


def test_find_files_in_the_wrong_folder_is_told_where_the_files_are(
    run_tool: RunTool, workspace: Path
) -> None:
    (workspace / "workers").mkdir()
    (workspace / "workers" / "loop.py").write_text("")
    (workspace / "supervisor").mkdir()
    (workspace / ".hidden").mkdir()
    (workspace / ".hidden" / "loop.py").write_text("")
    told = run_tool("find_files", pattern="loop.py", path="supervisor").output
    assert told == (
        "no files match 'loop.py' under 'supervisor'; elsewhere in the workspace: workers/loop.py"
    )
    assert run_tool("find_files", pattern="nothing.py").output == "no files match 'nothing.py'"
