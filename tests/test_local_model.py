"""The real local model: llama.cpp serving Qwen2.5-Coder-1.5B, driven by gaffer's loop.

Slow (the model is 1.1 GB and runs on the CPU): run by `make test-slow`, not `make test`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.local import server, store
from supervisor.run_plan import RunPlan
from supervisor.session import Session
from workers.assembly.build import AgentRules
from workers.assembly.profiles import builtin_dir, load_profiles
from workers.model.openai_client import OpenAIModel
from workers.tools import BUILTIN_TOOLS

pytestmark = pytest.mark.slow


def test_a_short_tool_calling_run_with_the_local_model(workspace: Path, tmp_path: Path) -> None:
    store.pull()
    (workspace / "alpha.py").write_text("def alpha():\n    return 1\n")
    (workspace / "beta.py").write_text("def beta():\n    return 2\n")
    with server.for_this_run() as running:
        model = OpenAIModel(
            model=running.model, base_url=running.base_url, api_key=None, request_timeout=300
        )
        session = Session(workspace, tmp_path / "logs")
        plan = RunPlan(
            profiles=load_profiles([builtin_dir()], BUILTIN_TOOLS),
            tools=dict(BUILTIN_TOOLS),
            make_model=lambda *_: model,
            top="explorer",
            max_steps=4,
            rules=AgentRules(context_window=16384),
        )
        result = session.run(
            "Use list_dir to list the folder . and then tell me the names of the Python files.",
            plan,
        )
    calls = session.recorder.of("tool_call")
    assert calls, "the model made no tool call that gaffer could parse"
    assert any(c["name"] == "list_dir" and not c["is_error"] for c in calls)
    assert result.outcome.__class__.__name__ in ("Finished", "LimitHit")
    llm = session.recorder.of("llm_call")
    assert all(r["usage_reported"] for r in llm) and llm[0]["prompt_tokens"] > 100


def test_make_demo_surveys_the_repository_and_answers(tmp_path: Path) -> None:
    """What a newcomer runs: the demo's task in a fresh clone, through the real CLI."""
    import os
    import re
    import subprocess
    import sys

    store.pull()
    root = Path(__file__).resolve().parent.parent
    clone = tmp_path / "some where" / "gaffer"
    subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
    makefile = (root / "Makefile").read_text()
    task = re.search(r"^DEMO_TASK := (.*)$", makefile, re.M)
    seconds = re.search(r"^DEMO_SECONDS := (\d+)$", makefile, re.M)
    assert task is not None and seconds is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GAFFER_"))}
    run = ["run", "--read-only", "--max-seconds", seconds.group(1), task.group(1)]
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", *run],
        cwd=clone,
        env={**env, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = done.stdout
    folders = [p.name for p in clone.iterdir() if p.is_dir() and not p.name.startswith(".")]
    named = [name for name in folders if name in answer]
    assert len(named) >= 2, f"the answer names {named} of {folders}: {answer}"
    records = _records(clone)
    workers = [str(r["child_id"]) for r in records if r.get("event") == "delegate_start"]
    assert workers, "the demo started no explorer"
    looked = {str(r["agent_id"]) for r in records if r.get("event") == "tool_call"}
    assert set(workers) <= looked, f"an explorer answered with no tool call: {workers}"
    # One slot on the server: the parts go to one reader, never two at once.
    assert _most_at_once(records) == server.SLOTS


def test_the_default_path_delegates_on_code_nobody_here_wrote(tmp_path: Path) -> None:
    """The same mechanism on another codebase: an installed dependency's source, asked
    a question in two parts, hands its parts to a reader, through the real CLI, as many
    at once as the server has slots."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    import tenacity

    store.pull()
    workspace = tmp_path / "tenacity"
    shutil.copytree(
        Path(tenacity.__file__).parent, workspace, ignore=shutil.ignore_patterns("__pycache__")
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GAFFER_"))}
    logs = tmp_path / "logs"
    task = (
        "Answer with a file path each: which file holds the wait strategies such as "
        "exponential backoff, and which file defines when to stop retrying?"
    )
    done = subprocess.run(
        [sys.executable, "-m", "supervisor", "run", "--read-only", "--output-format", "json", task],
        cwd=workspace,
        env={**env, "GAFFER_LOG_DIR": str(logs)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    result = json.loads(done.stdout)
    assert result["status"] == "completed", done.stderr[-3000:]
    assert result["workers"] and {w["profile"] for w in result["workers"]} == {"explorer"}
    # One slot on the server: the workers take turns in gaffer, never two at once.
    assert _most_at_once(_records(logs, under=True)) == server.SLOTS


def _records(where: Path, *, under: bool = False) -> list[dict[str, object]]:
    """The run's log lines: in `where` itself, or in the clone's state folder."""
    import json

    from workers import state

    folder = where if under else state.workspace_dir(where) / "logs"
    return [
        json.loads(line)
        for log in sorted(folder.glob("*.jsonl"))
        for line in log.read_text().splitlines()
        if line.strip()
    ]


def _most_at_once(records: list[dict[str, object]]) -> int:
    """The most workers running at once, from their agent_start and agent_end lines."""
    edges = sorted(
        (str(r["ts"]), 1 if r["event"] == "agent_start" else -1)
        for r in records
        if r.get("parent_id") and r.get("event") in ("agent_start", "agent_end")
    )
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most
