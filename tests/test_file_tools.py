"""read_file, write_file, edit_file and list_dir on real files."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SECRET, RunTool
from workers.facts import Facts
from workers.tools.describe import workspace_glance
from workers.tools.files import MAX_LIST_ENTRIES, MAX_READ_BYTES, MAX_READ_LINES


def test_read_small_file_whole(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "a.py").write_text("one\ntwo\n")
    result = run_tool("read_file", path="a.py")
    assert result.output == "one\ntwo\n" and not result.is_error
    assert result.summary == "lines 1-2 of 2"


def test_read_caps_lines_and_says_how_to_continue(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 5001)))
    first = run_tool("read_file", path="big.txt")
    assert first.output.count("\n") >= MAX_READ_LINES
    assert f"showing lines 1-{MAX_READ_LINES} of 5000" in first.output
    assert f"offset={MAX_READ_LINES + 1}" in first.output
    second = run_tool("read_file", path="big.txt", offset=4990, limit=5)
    assert second.output.startswith("line 4990\n")
    assert "showing lines 4990-4994 of 5000" in second.output


def test_read_takes_the_line_a_small_model_names_as_where_to_start(
    run_tool: RunTool, workspace: Path
) -> None:
    """Shown "core.py:213 class Context", the bundled model called read_file with `line`
    five times, each refused; `line` and `start_line` say what `offset` says."""
    (workspace / "a.py").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    for name in ("line", "start_line"):
        result = run_tool("read_file", path="a.py", limit=2, **{name: 7})
        assert result.output.startswith("line 7\nline 8\n") and not result.is_error
    assert run_tool("read_file", path="a.py", lines=7).is_error, "other names stay refused"


def test_read_caps_bytes(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "wide.txt").write_text(("x" * 999 + "\n") * 200)
    result = run_tool("read_file", path="wide.txt")
    assert len(result.output.encode()) < MAX_READ_BYTES + 500
    assert "call read_file with offset=" in result.output


def test_read_cuts_one_enormous_line(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "min.js").write_text("a" * (MAX_READ_BYTES * 3) + "\nsecond\n")
    result = run_tool("read_file", path="min.js")
    assert "longer than" in result.output and "offset=2" in result.output
    assert run_tool("read_file", path="min.js", offset=2).output.startswith("second")


def test_read_refuses_binary(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    result = run_tool("read_file", path="img.png")
    assert result.is_error and "binary" in result.output


def test_read_non_utf8_is_replaced_and_said(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    result = run_tool("read_file", path="latin.txt")
    assert "caf\ufffd" in result.output and "not valid UTF-8" in result.output


def test_read_missing_empty_dir_and_past_end(run_tool: RunTool, workspace: Path) -> None:
    assert "no such file" in run_tool("read_file", path="nope.py").output
    (workspace / "empty.txt").write_text("")
    assert run_tool("read_file", path="empty.txt").output == "(empty file)"
    (workspace / "d").mkdir()
    assert "is a directory" in run_tool("read_file", path="d").output
    (workspace / "short.txt").write_text("a\nb\n")
    past = run_tool("read_file", path="short.txt", offset=10)
    assert past.is_error and "past the end" in past.output


def test_write_creates_parents_and_reports_replace(run_tool: RunTool, workspace: Path) -> None:
    first = run_tool("write_file", path="pkg/sub/mod.py", content="x = 1\n")
    assert (workspace / "pkg/sub/mod.py").read_text() == "x = 1\n"
    assert "wrote 6 bytes" in first.output and "created" in first.output
    assert first.facts == Facts(modified=("pkg/sub/mod.py",))
    second = run_tool("write_file", path="pkg/sub/mod.py", content="x = 22\n")
    assert "replaced the existing file" in second.output


def test_write_onto_a_folder_is_refused(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "d").mkdir()
    assert run_tool("write_file", path="d", content="x").is_error


def test_edit_replaces_exactly_one_match(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    result = run_tool("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
    assert not result.is_error and result.summary == "replaced 1 match"
    assert "line 2" in result.output
    assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"


def test_edit_with_no_match_shows_nearest_lines_and_writes_nothing(
    run_tool: RunTool, workspace: Path
) -> None:
    original = "def add(a, b):\n    return a - b\n"
    (workspace / "calc.py").write_text(original)
    result = run_tool("edit_file", path="calc.py", old_text="return a-b", new_text="return a+b")
    assert result.is_error and "not found" in result.output
    assert "line 2:     return a - b" in result.output
    assert (workspace / "calc.py").read_text() == original


def test_edit_with_several_matches_gives_count_and_lines(
    run_tool: RunTool, workspace: Path
) -> None:
    original = "x = 1\ny = 2\nx = 1\n"
    (workspace / "v.py").write_text(original)
    result = run_tool("edit_file", path="v.py", old_text="x = 1", new_text="x = 3")
    assert result.is_error and "matches 2 places" in result.output and "lines 1, 3" in result.output
    assert (workspace / "v.py").read_text() == original


def test_edit_keeps_windows_line_endings(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "w.txt").write_bytes(b"alpha\r\nbeta\r\n")
    result = run_tool("edit_file", path="w.txt", old_text="alpha\nbeta", new_text="alpha\ngamma")
    assert not result.is_error
    assert (workspace / "w.txt").read_bytes() == b"alpha\r\ngamma\r\n"


def test_edit_refuses_empty_old_text_and_no_op(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    assert (
        "old_text is empty" in run_tool("edit_file", path="a.txt", old_text="", new_text="b").output
    )
    assert "the same" in run_tool("edit_file", path="a.txt", old_text="a", new_text="a").output


def test_list_dir_shows_types_sizes_and_skips_tool_folders(
    run_tool: RunTool, workspace: Path
) -> None:
    (workspace / "src").mkdir()
    (workspace / "README.md").write_text("hello")
    for skipped in (".git", "node_modules", "__pycache__", ".venv"):
        (workspace / skipped).mkdir()
    result = run_tool("list_dir")
    assert result.output.splitlines()[0] == "src/"
    assert "README.md  5 B" in result.output
    assert "skipped: .git, .venv, __pycache__, node_modules" in result.output


def test_the_glance_says_what_each_folder_is_for_in_its_own_words(
    workspace: Path, outside: Path
) -> None:
    """A package docstring or a README heading, read without following a link: a folder
    whose README points out of the workspace says nothing."""
    (workspace / "core").mkdir()
    (workspace / "core" / "__init__.py").write_text('"""The agent loop and its tools."""\n')
    (workspace / "docs").mkdir()
    (workspace / "docs" / "README.md").write_text("\n# How to read the docs\n\nMore.\n")
    (workspace / "leaky").mkdir()
    (workspace / "leaky" / "README.md").symlink_to(outside / "secret.txt")
    (workspace / ".env").write_text("TOKEN=inside-secret\n")
    (workspace / "inner").mkdir()
    (workspace / "inner" / "README").symlink_to(workspace / ".env")
    (workspace / "plain_readme").mkdir()
    (workspace / "plain_readme" / "README").write_text("Scripts for releases.\n")
    (workspace / "plain").mkdir()
    (workspace / "plain" / "a.py").write_text("x = 1\n")
    lines = workspace_glance(workspace).splitlines()
    assert "core/ (The agent loop and its tools.) __init__.py" in lines
    assert "docs/ (How to read the docs) README.md" in lines
    assert "leaky/ README.md" in lines and "plain/ a.py" in lines
    assert "plain_readme/ (Scripts for releases.) README" in lines
    assert SECRET.strip() not in "\n".join(lines) and "inside-secret" not in "\n".join(lines)


def test_list_dir_is_capped_with_a_count(run_tool: RunTool, workspace: Path) -> None:
    for i in range(MAX_LIST_ENTRIES + 25):
        (workspace / f"f{i:04}.txt").write_text("")
    result = run_tool("list_dir")
    assert "25 more entries not shown" in result.output


def test_an_edit_with_text_from_another_file_says_where_it_is(
    run_tool: RunTool, workspace: Path
) -> None:
    """What a small coder did: it copied old_text from the test it had read."""
    (workspace / "stats.py").write_text("def median(v):\n    return sorted(v)[len(v) // 2]\n")
    (workspace / "test_stats.py").write_text(
        "def test():\n    assert median([4, 1, 3, 2]) == 2.5\n"
    )
    result = run_tool(
        "edit_file", path="stats.py", old_text="assert median([4, 1, 3, 2]) == 2.5", new_text="x"
    )
    assert result.is_error
    assert "That text is in test_stats.py (line 2), not in stats.py" in result.output
    assert "change the code, not the tests" in result.output


def test_a_path_that_is_not_there_is_told_where_its_name_is(
    run_tool: RunTool, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "sandbox_image").mkdir()
    (workspace / "sandbox_image" / "Dockerfile").write_text("FROM scratch\n")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "Dockerfile").write_text("hidden\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.txt").write_text("no")
    (workspace / "link").symlink_to(outside)

    told = run_tool("read_file", path="supervisor/image/Dockerfile").output
    assert "did you mean 'sandbox_image/Dockerfile'?" in told and ".git" not in told
    assert "did you mean" in run_tool("find_files", pattern="*", path="x/sandbox_image").output
    assert "did you mean" in run_tool("grep", pattern="FROM", path="a/Dockerfile").output
    assert "did you mean" not in run_tool("read_file", path="secret.txt").output, "no link out"
    assert "use list_dir or find_files" in run_tool("read_file", path="nowhere.py").output


def test_the_shallowest_places_of_a_name_are_told_first(run_tool: RunTool, workspace: Path) -> None:
    for folder in ("docs", "logs", "sandbox_image", "sandbox_image/deep"):
        (workspace / folder).mkdir()
        (workspace / folder / "README.md").write_text(folder)
    (workspace / "README.md").write_text("top")
    told = run_tool("read_file", path="guide/README.md").output
    assert told.endswith("did you mean 'README.md' or 'docs/README.md' or 'logs/README.md'?")


def test_a_real_path_behind_an_invented_folder_is_read_and_said_to_be_another(
    run_tool: RunTool, workspace: Path, tmp_path: Path
) -> None:
    """A small model that puts a folder it made up in front of a real path gets the real
    one at once, told so; never a file out through a link, nor a bare name at the top."""
    (workspace / "sandbox_image").mkdir()
    (workspace / "sandbox_image" / "Dockerfile").write_text("FROM scratch\n")
    (workspace / "README.md").write_text("top")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET")
    (workspace / "link").symlink_to(outside)

    read = run_tool("read_file", path="supervisor/sandbox_image/Dockerfile")
    assert not read.is_error
    assert read.output.startswith(
        "[there is no 'supervisor/sandbox_image/Dockerfile'; this is 'sandbox_image/Dockerfile']\n"
    )
    assert "FROM scratch" in read.output
    listed = run_tool("list_dir", path="a/b/sandbox_image").output
    assert listed.startswith("[there is no 'a/b/sandbox_image'; this is 'sandbox_image']\n")
    assert "Dockerfile" in listed
    assert "SECRET" not in run_tool("read_file", path="x/link/secret.txt").output
    assert run_tool("read_file", path="docs/README.md").is_error, "a folder and a name, at least"
    assert run_tool("read_file", path="../sandbox_image/Dockerfile").is_error


def test_a_module_named_as_python_imports_it_is_told_where_its_file_is(
    run_tool: RunTool, workspace: Path
) -> None:
    """grep, list_dir, find_files and read_file given `core` where core.py is (the
    bench's click reader made thirteen calls so) are told the file; a name with a suffix
    is matched whole."""
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "core.py").write_text("class Context:\n    pass\n")
    (workspace / "pkg" / "core_utils.py").write_text("x = 1\n")
    for tool, args in [
        ("grep", {"pattern": "Context", "path": "core"}),
        ("list_dir", {"path": "core"}),
        ("find_files", {"pattern": "*", "path": "core"}),
        ("read_file", {"path": "core"}),
    ]:
        told = run_tool(tool, **args).output
        assert told.endswith("did you mean 'pkg/core.py'?"), (tool, told)
    assert "did you mean" not in run_tool("read_file", path="core.txt").output
    # The file beside the path asked for first, then the very name, then the shallowest.
    for folder in ("docs", "src/click"):
        (workspace / folder).mkdir(parents=True)
        (workspace / folder / "__init__.py").write_text("")
    (workspace / "src" / "click" / "core.c").write_text("")
    told = run_tool("grep", pattern="x", path="src/click/__init__").output
    assert told.endswith("did you mean 'src/click/__init__.py' or 'docs/__init__.py'?")
    assert run_tool("read_file", path="src/click/core").output.endswith(
        "did you mean 'src/click/core.c' or 'pkg/core.py'?"
    )


def test_a_path_written_as_a_pattern_is_searched_as_one_and_a_file_given_find_files_is_there(
    run_tool: RunTool, workspace: Path
) -> None:
    """A small model searching everywhere writes `*` for grep's path (the bench's
    pygments reader: three greps, then a circle), and gives find_files a file to ask
    whether it is there (pydantic's: six calls). Outside the workspace stays shut."""
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("needle = 1\n")
    (workspace / "src" / "b.txt").write_text("needle\n")
    told = run_tool("grep", pattern="needle", path="*").output
    assert told.startswith("['*' is a pattern, not a path: this is '.']\n")
    assert "src/a.py:1:needle = 1" in told and "src/b.txt:1:needle" in told
    told = run_tool("grep", pattern="needle", path="src/**/*.py").output
    assert told.startswith(
        "['src/**/*.py' is a pattern, not a path: this is 'src', files matching '*.py']"
    )
    assert "src/a.py" in told and "b.txt" not in told
    listed = run_tool("find_files", pattern="*.py", path="**").output
    assert listed.endswith("src/a.py")
    there = run_tool("find_files", pattern="a", path="src/a.py")
    assert not there.is_error and there.output.startswith("'src/a.py' is a file, and it is there")
    assert run_tool("grep", pattern="x", path="../*").is_error
    assert (
        "no such file or folder: 'nope'" in run_tool("grep", pattern="x", path="nope/*.py").output
    )


def test_a_path_from_above_the_workspace_finds_its_file(run_tool: RunTool, workspace: Path) -> None:
    """A workspace that is a package's own folder (`requests/`): the bench's reader named
    `requests/adapters.py` for adapters.py, got "no such file" and sent the same eleven
    calls twice more. The workspace's own name, where no folder inside has it, is taken
    off; a path that goes out is still refused."""
    (workspace / "adapters.py").write_text("class HTTPAdapter:\n    pass\n")
    own = workspace.name
    assert "class HTTPAdapter" in run_tool("read_file", path=f"{own}/adapters.py").output
    found = run_tool("grep", pattern="HTTPAdapter", path=f"{own}/adapters.py").output
    assert found.startswith("1:class HTTPAdapter"), found
    assert run_tool("read_file", path=f"{own}/../{own}/../secret.txt").is_error
    # `..` is taken as written first: no look outside for whether a file is there.
    (workspace.parent / "elsewhere.txt").write_text("x")
    there = run_tool("read_file", path=f"{own}/../elsewhere.txt").output
    assert there.startswith("error: no such file"), there
    assert (
        there.split(":", 2)[:2]
        == (run_tool("read_file", path=f"{own}/../nowhere.txt").output.split(":", 2)[:2])
    )
    # A write goes where it says: a new requests/adapters.py, not the file at the top.
    edited = run_tool("edit_file", path=f"{own}/adapters.py", old="class", new="klass")
    assert edited.is_error and "class HTTPAdapter" in (workspace / "adapters.py").read_text()
    (workspace / own).mkdir()  # a folder of that name inside: the path means it
    assert run_tool("read_file", path=f"{own}/adapters.py").is_error
