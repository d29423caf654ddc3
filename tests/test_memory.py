"""remember writes AGENT.md; AGENT.md and AGENTS.md reach every agent's system prompt."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from supervisor.run_plan import RunPlan
from supervisor.session import Session
from tests.conftest import RunTool
from workers.assembly.profiles import builtin_dir, load_profiles
from workers.model.scripted import RoutedModel, Step, call, say
from workers.tools import BUILTIN_TOOLS
from workers.tools.memory import MAX_INSTRUCTIONS_BYTES, project_instructions


def test_remember_appends_dated_entries(run_tool: RunTool, workspace: Path) -> None:
    (workspace / "AGENT.md").write_text("# Notes\n\nUse tabs.\n")
    first = run_tool("remember", content="Run the tests with `make check`.")
    run_tool("remember", content="Name branches feature/<topic>.")
    assert not first.is_error and first.facts.modified == ("AGENT.md",)
    text = (workspace / "AGENT.md").read_text()
    today = dt.date.today().isoformat()
    assert text.startswith("# Notes\n\nUse tabs.\n")
    assert (
        f"- {today}: Run the tests with `make check`.\n- {today}: Name branches feature/<topic>.\n"
        in text
    )
    assert text.count("## Remembered by gaffer") == 1


def test_remember_refuses_empty_and_huge(run_tool: RunTool) -> None:
    assert run_tool("remember", content="   ").is_error
    assert "keep an entry under" in run_tool("remember", content="x" * 5000).output


def test_remember_writes_no_file_through_a_link_named_agent_md(
    run_tool: RunTool, workspace: Path
) -> None:
    """A repository can ship `AGENT.md -> src/app.py`: the memory would have gone into
    the code, recorded as AGENT.md and so passed over by the verification gate."""
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("x = 1\n")
    (workspace / "AGENT.md").symlink_to("src/app.py")
    result = run_tool("remember", content="run the tests with pytest")
    assert result.is_error and "AGENT.md is a link to 'src/app.py'" in result.output
    assert (workspace / "src" / "app.py").read_text() == "x = 1\n"
    # A link to AGENTS.md, the instructions every tool reads, is where memory goes.
    (workspace / "AGENT.md").unlink()
    (workspace / "AGENTS.md").write_text("# Rules\n")
    (workspace / "AGENT.md").symlink_to("AGENTS.md")
    kept = run_tool("remember", content="run the tests with pytest")
    assert kept.output.startswith("remembered in AGENTS.md")
    assert kept.facts.modified == ("AGENTS.md",)
    assert "run the tests with pytest" in (workspace / "AGENTS.md").read_text()


def test_instructions_are_capped(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("rule\n" * 20_000)
    text = project_instructions(workspace)
    assert text.startswith("## AGENTS.md") and len(text.encode()) < MAX_INSTRUCTIONS_BYTES + 200
    assert "the rest of AGENTS.md, past 32 KB, not loaded" in text


def test_memory_written_in_one_run_is_loaded_in_the_next_by_every_agent(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "AGENTS.md").write_text("Project rule: never edit generated/.\n")
    profiles = load_profiles([builtin_dir()], BUILTIN_TOOLS)

    def run(scripts: dict[str, list[Step]], task: str) -> RoutedModel:
        model = RoutedModel(scripts)
        plan = RunPlan(profiles=profiles, tools=dict(BUILTIN_TOOLS), make_model=lambda *_: model)
        Session(workspace, tmp_path / "logs").run(task, plan)
        return model

    run(
        {"first": [call("remember", content="Tests run with `make check`."), say("noted")]}, "first"
    )
    second = run(
        {
            "second": [call("delegate", profile="explorer", task="look"), say("ok")],
            "look": [say("seen")],
        },
        "second",
    )
    supervisor_prompt = second.seen("second")[0][0]["content"]
    worker_prompt = second.seen("look")[0][0]["content"]
    for prompt in (supervisor_prompt, worker_prompt):
        assert "Tests run with `make check`." in prompt
        assert "Project rule: never edit generated/." in prompt
