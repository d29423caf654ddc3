"""Small-model aids: what steps in at the loop's seam (workers/hooks.py) for a model that
needs it. Each is a layer beside the loop, never a branch in it; assembly gives an agent
its aids once, here."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from workers.aids.file_blocks import FileBlocks
from workers.aids.focused_write import FocusedWrite
from workers.aids.fresh_attempts import FreshAttempts
from workers.aids.reports_answer import AnswerFromReports
from workers.aids.task_files import TaskFiles
from workers.aids.task_parts import Find, TaskParts
from workers.aids.task_rules import task_rules_for
from workers.aids.tests_after_writes import TestsAfterWrites
from workers.hooks import Aid, Aids


def aids_for(
    tools: Mapping[str, object],
    container_root: str | None,
    *,
    attach_task_files: bool,
    file_blocks: bool,
    tracks_changes: bool,
    works_through_workers: bool = False,
    reader: str | None = None,
    workspace: Path | None = None,
    user_task: str = "",
    at_once: int = 4,
    joins_reports: bool = False,
    find: Find | None = None,
) -> Aids:
    """The aids of an agent with these tools: the files its task is about read before
    its first step; for one that can change files, the tests its task or the run's
    `user_task` keeps as they are (and those its test command runs, for one that writes
    in blocks); for one that writes in blocks, the blocks written, the tests its task
    names run after each write and, when it can run the tests and its changes are
    tracked, fresh attempts when it is stuck on them, then a focused ask when it stalls
    (asked in that order). One that
    `works_through_workers` (it delegates and reads nothing itself) has a question's
    parts handed to `reader`s, no more than `at_once` (or is shown a change's parts), and
    answers once its workers have reported; with `joins_reports`, their answers joined
    are its answer to a question it handed out so, and a first answer from `find` (the
    repo map's search) goes with the parts for the readers to check."""
    chosen: list[Aid] = []
    if works_through_workers:  # the answer aid first: it counts the batches from there
        chosen += [AnswerFromReports(), TaskParts(reader, at_once, joins=joins_reports, find=find)]
    if attach_task_files:
        chosen.append(TaskFiles(container_root, workspace))
    if (rules := task_rules_for(tools, file_blocks=file_blocks, user_task=user_task)) is not None:
        chosen.append(rules)
    if file_blocks:
        chosen.append(FileBlocks())
        if "run_shell" in tools:
            chosen.append(TestsAfterWrites())
        if "run_shell" in tools and tracks_changes:
            # before the focused ask: stuck on failing tests, the model asked once more
            # at its usual sampling writes its failing code back (held-out suite: 6 of 6)
            chosen.append(FreshAttempts())
        chosen.append(FocusedWrite())
    return Aids(chosen)
