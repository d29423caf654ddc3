"""The terminal view: the top agent's text, whole lines per worker, a live footer on a TTY."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from supervisor.run_plan import RunPlan
from supervisor.session import Session
from supervisor.view import TerminalView
from workers.assembly.profiles import builtin_dir, load_profiles
from workers.model.scripted import RoutedModel, Step, call, calls, say
from workers.tools import BUILTIN_TOOLS


def run_with_view(workspace: Path, tmp_path: Path, *, terminal: bool) -> str:
    (workspace / "tests").mkdir()  # what the answers name is there: the gate checks
    scripts: dict[str, list[Step]] = {
        "survey": [
            calls(
                ("delegate", {"profile": "explorer", "task": "find the tests"}),
                ("delegate", {"profile": "explorer", "task": "find the docs"}),
                text="Splitting the survey in two.",
            ),
            say("Tests are in tests/, docs in README."),
        ],
        "find the tests": [call("find_files", pattern="test_*.py"), say("tests/")],
        "find the docs": [call("list_dir"), say("README")],
    }
    model = RoutedModel(scripts, latency=0.05)
    buffer = io.StringIO()
    console = Console(
        file=buffer, force_terminal=terminal, width=200, highlight=False, soft_wrap=True
    )
    session = Session(workspace, tmp_path / "logs", [TerminalView(console)])
    plan = RunPlan(
        profiles=load_profiles([builtin_dir()], BUILTIN_TOOLS),
        tools=dict(BUILTIN_TOOLS),
        make_model=lambda *_: model,
    )
    session.run("survey", plan)
    return buffer.getvalue()


def test_plain_view_shows_whole_lines_per_worker(workspace: Path, tmp_path: Path) -> None:
    out = run_with_view(workspace, tmp_path, terminal=False)
    lines = out.splitlines()
    assert lines[0] == "Splitting the survey in two."
    # Parallel workers take their ids in the order the pool starts them.
    starts = {line.split(": ", 1)[1]: line.split()[1] for line in lines if line.startswith("→ ")}
    assert sorted(starts) == ["find the docs", "find the tests"]
    assert sorted(starts.values()) == ["w1", "w2"]
    tests_id, docs_id = starts["find the tests"], starts["find the docs"]
    assert any(line.startswith(f"  {tests_id} [step 1] find_files test_*.py → ") for line in lines)
    assert any(line.startswith(f"  {docs_id} [step 1] list_dir → ") for line in lines)
    done = [line for line in lines if line.startswith("✓ ")]
    assert len(done) == 2 and all("completed · 2 steps" in line for line in done)
    assert lines[-1] == "Tests are in tests/, docs in README."
    assert "\x1b[" not in out


@pytest.mark.parametrize("terminal", [True])
def test_terminal_view_runs_a_live_footer_and_leaves_clean_lines(
    workspace: Path, tmp_path: Path, terminal: bool
) -> None:
    out = run_with_view(workspace, tmp_path, terminal=terminal)
    assert "⋯ w" in out  # the live footer was drawn while workers ran
    assert "Tests are in tests/, docs in README." in out


def test_a_denied_command_shows_why() -> None:
    out = io.StringIO()
    view = TerminalView(Console(file=out, width=200))
    view(
        {
            "event": "tool_call",
            "agent_id": "supervisor",
            "step": 2,
            "name": "run_shell",
            "label": "rm -rf build",
            "summary": "denied",
            "is_error": True,
            "result_preview": "denied: it deletes files outside the read-only allowlist\nmore",
            "facts": {"command": "rm -rf build", "denied": True},
        }
    )
    assert "run_shell rm -rf build → denied · denied: it deletes files" in out.getvalue()


def test_a_fresh_attempt_says_whether_it_was_kept() -> None:
    out = io.StringIO()
    view = TerminalView(Console(file=out, width=200))
    for kept, reason in (
        (False, "the tests failed (exit 1); taken back"),
        (True, "the tests pass"),
    ):
        view(
            {
                "event": "fresh_attempt",
                "agent_id": "w1",
                "parent_id": "supervisor",
                "attempt": 2 if kept else 1,
                "temperature": 0.8,
                "files": ["calc.py"],
                "kept": kept,
                "reason": reason,
            }
        )
    lines = out.getvalue().splitlines()
    assert lines == [
        "  w1: gaffer drew the change afresh (sample 1, temperature 0.8): the tests failed "
        "(exit 1); taken back",
        "  w1: gaffer drew the change afresh (sample 2, temperature 0.8): the tests pass",
    ]


def test_a_reply_ended_in_a_loop_says_so() -> None:
    out = io.StringIO()
    view = TerminalView(Console(file=out, width=200))
    loop = '\'.replace("x", "")\' written 15 times in a row'
    view({"event": "llm_call", "agent_id": "w1", "parent_id": "supervisor", "runaway": loop})
    assert out.getvalue().splitlines() == [
        f"  w1: the reply began repeating itself ({loop}); gaffer ended it there"
    ]


def test_a_join_of_two_samples_names_them() -> None:
    out = io.StringIO()
    view = TerminalView(Console(file=out, width=200))
    reason = "sample 3 with decode in rle.py from sample 1: the tests pass"
    view(
        {
            "event": "fresh_attempt",
            "agent_id": "main",
            "attempt": 3,
            "temperature": 1.0,
            "files": ["rle.py"],
            "kept": True,
            "reason": reason,
            "made_from": [3, 1],
        }
    )
    assert out.getvalue().splitlines() == [f"  gaffer joined samples 3 and 1: {reason}"]
