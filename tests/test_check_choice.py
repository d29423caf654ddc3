"""Which command checks a run (workers/check/choose.py): the flag, the config, a command
the task names in whatever wording, or the project's own files; and, with none, why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workers.check.choose import Check, NoCheck, choose, named_command, project_check

PYTEST = "python3 -m pytest -q isogram_test.py"


@pytest.mark.parametrize(
    "task",
    [
        # the held-out exercises' own wording: the command in parentheses, mid-sentence
        f"Implement is_isogram in isogram.py so the tests in isogram_test.py pass (run them "
        f"with: {PYTEST}). Do not modify the tests.",
        f"Make the tests pass. Run the tests with: {PYTEST}",
        f"Make the tests pass; run `{PYTEST}` to check.",
        f'Fix it, then use "{PYTEST}" and make sure nothing fails.',
        f"Fix it ({PYTEST}) and keep the tests as they are.",
        f"Fix the bug. Command: {PYTEST}.",
        f"Fix the bug and run {PYTEST}. Nothing else should change.",
        f"Please fix isogram.py.\n\n```\n{PYTEST}\n```\n",
        f"Fix isogram.py. The tests are run with “{PYTEST}”.",
    ],
)
def test_a_named_command_is_found_whatever_the_wording(task: str) -> None:
    assert named_command(task) == PYTEST


@pytest.mark.parametrize(
    "task",
    [
        "Implement is_isogram in isogram.py so that the tests pass. Do not modify the tests.",
        "Run the tests and tell me what fails.",
        "Install it with: pip install requests. Then explain the code.",
        "Rename `foo` to `bar` everywhere (keep the tests passing).",
        "with: the quick brown fox (jumps) over",
    ],
)
def test_no_command_is_read_out_of_plain_prose(task: str) -> None:
    assert named_command(task) is None


def test_the_sources_in_order(tmp_path: Path) -> None:
    (tmp_path / "isogram_test.py").write_text("def test_x():\n    pass\n")
    task = f"Fix it (run them with: {PYTEST})."
    assert choose(tmp_path, task, flag="make check") == Check("make check", "flag")
    assert choose(tmp_path, task, config="tox -e py") == Check("tox -e py", "config")
    assert choose(tmp_path, task) == Check(PYTEST, "task")
    named = choose(tmp_path, "Fix isogram so isogram_test.py passes.")
    assert named == Check("python3 -m pytest -q isogram_test.py", "project")
    assert named.describe() == (
        "check: `python3 -m pytest -q isogram_test.py` (from the project's files)"
    )


def test_the_project_s_files_give_the_command(tmp_path: Path) -> None:
    def project(files: dict[str, str]) -> str | None:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
        return project_check(folder)

    assert project({"pyproject.toml": "[tool.pytest.ini_options]\n"}) == "python3 -m pytest -q"
    assert project({"setup.cfg": "[tool:pytest]\naddopts = -q\n"}) == "python3 -m pytest -q"
    assert project({"tests/test_app.py": "def test(): pass\n"}) == "python3 -m pytest -q"
    scripts = {"scripts": {"test": "jest"}}
    assert project({"package.json": json.dumps(scripts)}) == "npm test"
    placeholder = {"scripts": {"test": 'echo "Error: no test specified" && exit 1'}}
    assert project({"package.json": json.dumps(placeholder)}) is None
    assert project({"go.mod": "module x\n"}) == "go test ./..."
    assert project({"Cargo.toml": "[package]\n"}) == "cargo test"
    assert project({"Makefile": "build:\n\tcc x.c\ntest: build\n\t./x\n"}) == "make test"
    assert project({"Makefile": "build:\n\tcc x.c\n", "README.md": "hi\n"}) is None


def test_with_nothing_to_check_the_run_says_why(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("notes\n")
    found = choose(tmp_path, "Tidy the notes.")
    assert isinstance(found, NoCheck)
    assert found.describe().startswith("unchecked: no --check, no check in the config")


def test_the_held_out_wording_keeps_its_tests_and_names_its_command(tmp_path: Path) -> None:
    """The wording of the held-out exercises: the command in parentheses, mid-sentence.
    The old finder took `... isogram_test.py)` and bash refused it, so neither the
    task's rules nor tests after writes ever switched on."""
    from workers.guards.task_rules import kept_tests

    (tmp_path / "isogram_test.py").write_text("def test_x():\n    pass\n")
    task = (
        "Implement is_isogram in isogram.py so the tests in isogram_test.py pass (run them "
        f"with: {PYTEST}). Do not modify the tests."
    )
    kept = kept_tests(task, tmp_path)
    assert kept is not None and kept.keeps("isogram_test.py")
    by_command = kept_tests(task.replace(" Do not modify the tests.", ""), tmp_path)
    assert by_command is not None and by_command.paths == ("isogram_test.py",)
