"""The agent task set (bench/exercises): every stub fails its tests, every reference
solution passes them, and no solution leaks into what a workspace is given."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.agent_tasks import Exercise, exercises, fresh_workspace, passes

EXERCISES = exercises()


def test_there_are_at_least_twelve() -> None:
    assert len(EXERCISES) >= 12


@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.name for e in EXERCISES])
def test_the_stub_fails_and_the_solution_passes(exercise: Exercise, tmp_path: Path) -> None:
    (tmp_path / "stub").mkdir()
    (tmp_path / "solved").mkdir()
    stub = fresh_workspace(exercise, tmp_path / "stub")
    assert sorted(p.name for p in stub.iterdir()) == sorted(p.name for p in exercise.files())
    assert not passes(stub), "the exercise is solved before anyone starts"
    solved = fresh_workspace(exercise, tmp_path / "solved")
    assert exercise.solution(), "a solution changes at least one file"
    for changed in exercise.solution():
        assert (exercise.folder / changed.name).is_file(), "a solution changes given files"
        shutil.copy(changed, solved)
    assert passes(solved)
    assert exercise.task.endswith("Run the tests with: python3 -m pytest -q")


@pytest.fixture(scope="module")
def heldout(tmp_path_factory: pytest.TempPathFactory) -> list[Exercise]:
    from bench.agent_tasks import heldout_exercises

    return heldout_exercises(tmp_path_factory.mktemp("heldout"))


def test_the_held_out_suite_is_ten_functions_nobody_here_wrote(heldout: list[Exercise]) -> None:
    from bench import heldout as suite

    drawn = suite.chosen()
    assert len(heldout) == len(drawn) == suite.COUNT
    here = str(Path(__file__).resolve().parent.parent)
    for found in drawn:
        assert not found.origin.startswith(here) and found.checks
    assert suite.chosen() == drawn, "the same draw every time"


def test_each_held_out_stub_fails_and_its_original_passes(
    heldout: list[Exercise], tmp_path: Path
) -> None:
    for exercise in heldout:
        (tmp_path / exercise.name / "stub").mkdir(parents=True)
        (tmp_path / exercise.name / "solved").mkdir()
        stub = fresh_workspace(exercise, tmp_path / exercise.name / "stub")
        assert not passes(stub), f"{exercise.name} is solved before anyone starts"
        solved = fresh_workspace(exercise, tmp_path / exercise.name / "solved")
        (original,) = exercise.solution()
        shutil.copy(original, solved)
        assert passes(solved), f"{exercise.name}: the original fails its recorded calls"
        body = original.read_text().split('"""')[-1].strip()  # the original's code
        given = "".join(p.read_text() for p in exercise.files())
        assert body not in given, f"{exercise.name}: the original leaks into the workspace"
        assert exercise.task.endswith("Run the tests with: python3 -m pytest -q")
