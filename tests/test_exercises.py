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
