"""Delegation: parallel readers, one-at-a-time editors, rights, budgets, states, the log tree."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from supervisor import delegation, scheduler
from supervisor.run_plan import Ceiling, RunPlan
from supervisor.runlog import read_records, render
from supervisor.session import Session
from workers.agent import AgentResult
from workers.assembly.build import AgentRules
from workers.assembly.profiles import builtin_dir, load_profiles
from workers.limits import Budget, Limits
from workers.log.events import Emitter, Record
from workers.model import AssistantTurn, Message, ModelError, Usage
from workers.model.scripted import RoutedModel, Step, call, calls, say
from workers.outcome import Finished
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import Args, Tool, ToolContext, ToolResult

EXTRA_PROFILES = {
    "writer": """
description = "Writes files on the host (test profile)."
tools = ["read_file", "write_file"]
system_prompt = "You write files in {workspace}."
""",
    "lead": """
description = "Reads and delegates further (test profile)."
tools = ["read_file", "delegate"]
system_prompt = "You lead in {workspace}."
""",
    "quick": """
description = "An explorer with one step (test profile)."
tools = ["list_dir"]
system_prompt = "Be quick."
[limits]
max_steps = 1
""",
    "hanger": """
description = "Calls a tool that never returns (test profile)."
tools = ["hang"]
system_prompt = "Hang."
[limits]
max_seconds = 0.5
""",
}


class HangArgs(Args):
    pass


def _hang(_ctx: ToolContext, _args: BaseModel) -> ToolResult:
    time.sleep(30)  # ignores cancellation, like a stuck network call would
    return ToolResult(output="late")


HANG = Tool(name="hang", description="Never returns.", args=HangArgs, run=_hang, read_only=True)


def delegate(profile: str, task: str) -> tuple[str, dict[str, Any]]:
    return ("delegate", {"profile": profile, "task": task})


def run_session(
    workspace: Path,
    tmp_path: Path,
    scripts: dict[str, list[Step]],
    *,
    task: str = "the job",
    latency: float = 0.0,
    on_session: Any = None,
    verify: bool = False,
    file_blocks: bool = False,
    **plan: Any,
) -> tuple[AgentResult, list[Record], RoutedModel]:
    extra = tmp_path / "extra_profiles"
    extra.mkdir(exist_ok=True)
    for name, text in EXTRA_PROFILES.items():
        (extra / f"{name}.toml").write_text(f'name = "{name}"\n' + text)
    tools = {**BUILTIN_TOOLS, "hang": HANG}
    model = RoutedModel(scripts, latency=latency)
    session = Session(workspace, tmp_path / "logs")
    if on_session is not None:
        on_session(session)
    result = session.run(
        task,
        RunPlan(
            profiles=load_profiles([builtin_dir(), extra], tools),
            tools=tools,
            make_model=lambda *_: model,
            rules=AgentRules(
                verify=verify, file_blocks=file_blocks, joins_reports=file_blocks and verify
            ),
            **plan,
        ),
    )
    return result, read_records(session.log.path), model


def of(records: list[Record], event: str, **match: Any) -> list[Record]:
    return [
        r for r in records if r["event"] == event and all(r.get(k) == v for k, v in match.items())
    ]


def interval(records: list[Record], agent_id: str) -> tuple[float, float]:
    start = of(records, "agent_start", agent_id=agent_id)[0]["ts"]
    end = of(records, "agent_end", agent_id=agent_id)[0]["ts"]
    return _seconds(start), _seconds(end)


def _seconds(ts: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(ts).timestamp()


def tool_answers(model: RoutedModel, task: str, turn: int) -> list[str]:
    """The tool results the model saw at the start of its `turn`-th call (0-based), each
    without the hint gaffer ends a worker's report with."""
    conversation = model.seen(task)[turn]
    return [
        m["content"].split("\n[gaffer: if the reports")[0]
        for m in conversation
        if m["role"] == "tool"
    ]


def test_parallel_readers_overlap_and_results_keep_call_order(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "a.py").write_text("A\n")
    tasks = [f"question {i}" for i in range(3)]
    scripts: dict[str, list[Step]] = {
        "the job": [calls(*(delegate("explorer", t) for t in tasks)), say("summary")],
        **{t: [call("list_dir", path=t[-1] * 0 or "."), say(f"answer to {t}")] for t in tasks},
    }
    result, records, model = run_session(workspace, tmp_path, scripts, latency=0.3)
    assert result.outcome == Finished("summary")
    intervals = [interval(records, f"w{i}") for i in (1, 2, 3)]
    latest_start = max(start for start, _ in intervals)
    earliest_end = min(end for _, end in intervals)
    assert latest_start < earliest_end, "the three explorers never ran at the same time"
    answers = tool_answers(model, "the job", 1)
    # Ids follow the order the pool started the workers in; results follow call order.
    assert sorted(a.splitlines()[0].split()[1] for a in answers) == ["w1", "w2", "w3"]
    for task, answer in zip(tasks, answers, strict=True):
        assert answer.endswith(f"answer to {task}")


def test_editors_never_overlap_and_run_in_call_order(workspace: Path, tmp_path: Path) -> None:
    tasks = ["write one", "write two", "write three"]
    scripts: dict[str, list[Step]] = {
        "the job": [calls(*(delegate("writer", t) for t in tasks)), say("done")],
        **{t: [call("write_file", path=f"{t[6:]}.txt", content=t), say("wrote")] for t in tasks},
    }
    _, records, model = run_session(workspace, tmp_path, scripts, latency=0.15)
    intervals = [interval(records, f"w{i}") for i in (1, 2, 3)]
    for (_, end), (start, _) in itertools.pairwise(intervals):
        assert end <= start, "two editors ran at the same time"
    starts = of(records, "delegate_start")
    assert [s["task"] for s in starts] == tasks
    answers = tool_answers(model, "the job", 1)
    assert "files changed: one.txt" in answers[0] and "files changed: two.txt" in answers[1]


def test_readers_and_an_editor_in_one_turn(workspace: Path, tmp_path: Path) -> None:
    scripts: dict[str, list[Step]] = {
        "the job": [
            calls(
                delegate("explorer", "look"),
                delegate("writer", "write"),
                delegate("explorer", "look again"),
            ),
            say("ok"),
        ],
        "look": [say("seen")],
        "look again": [say("seen again")],
        "write": [call("write_file", path="out.txt", content="x"), say("written")],
    }
    result, _, model = run_session(workspace, tmp_path, scripts)
    assert result.outcome == Finished("ok")
    answers = tool_answers(model, "the job", 1)
    assert (
        answers[0].endswith("seen")
        and answers[1].endswith("written")
        and answers[2].endswith("seen again")
    )


def test_a_batch_that_mixes_readers_and_an_editor_never_overlaps_them(
    workspace: Path, tmp_path: Path
) -> None:
    looks = ["look one", "look two", "look three"]
    scripts: dict[str, list[Step]] = {
        "the job": [
            calls(
                delegate("explorer", looks[0]),
                delegate("writer", "write"),
                delegate("explorer", looks[1]),
                delegate("explorer", looks[2]),
            ),
            say("ok"),
        ],
        **{look: [call("read_file", path="out.txt"), say("seen")] for look in looks},
        "write": [
            call("write_file", path="out.txt", content="half"),
            call("write_file", path="out.txt", content="whole"),
            say("written"),
        ],
    }
    (workspace / "out.txt").write_text("before")
    result, records, _ = run_session(workspace, tmp_path, scripts, latency=0.2)
    assert result.outcome == Finished("ok")
    ids = {s["task"]: s["child_id"] for s in of(records, "delegate_start")}
    writing = interval(records, ids["write"])
    for look in looks:
        start, end = interval(records, ids[look])
        assert end <= writing[0] or start >= writing[1], f"{look!r} ran while the editor wrote"
    seen = [r["content"] for r in of(records, "tool_call", name="read_file")]
    assert set(seen) <= {"before", "whole"}, "no reader saw the half-made change"
    readers = [interval(records, ids[look]) for look in looks[1:]]
    assert max(s for s, _ in readers) < min(e for _, e in readers), "readers still share"


def test_the_workspace_lock_readers_share_an_editor_is_alone() -> None:
    lock = scheduler.WorkspaceLock(max_readers=4)
    lock.acquire("r1", exclusive=False, budget=Budget())
    lock.acquire("r2", exclusive=False, budget=Budget())
    took: list[str] = []
    editor = threading.Thread(
        target=lambda: took.append(str(lock.acquire("e", exclusive=True, budget=Budget())))
    )
    editor.start()
    time.sleep(0.2)
    assert took == [], "the editor waits for the readers"
    with pytest.raises(scheduler.NotStarted):  # a new reader waits behind the editor
        lock.acquire("r3", exclusive=False, budget=Budget(max_seconds=0.2))
    lock.release("r1")
    lock.release("r2")
    editor.join(2)
    assert took == ["None"]
    lock.release("e")
    lock.acquire("r4", exclusive=False, budget=Budget())


def test_at_most_max_parallel_readers_hold_the_lock() -> None:
    lock = scheduler.WorkspaceLock(max_readers=2)
    lock.acquire("r1", exclusive=False, budget=Budget())
    lock.acquire("r2", exclusive=False, budget=Budget())
    with pytest.raises(scheduler.NotStarted):
        lock.acquire("r3", exclusive=False, budget=Budget(max_seconds=0.2))
    lock.release("r1")
    lock.acquire("r3", exclusive=False, budget=Budget(max_seconds=0.2))


def an_editor_holding_the_lock(
    budget: Budget, *, exclusive: bool = True, max_parallel: int = 4
) -> tuple[scheduler.Scheduler, Callable[[], scheduler.WorkerRun], threading.Event]:
    """A scheduler whose worker w1 (an editor, or a reader) holds the workspace until the
    returned event is set."""
    jobs = scheduler.Scheduler(max_parallel)
    holding, done = threading.Event(), threading.Event()

    def hold(_moved: Any) -> AgentResult:
        holding.set()
        done.wait(5)
        return AgentResult(Finished("held"), [])

    first = jobs.start("w1", ("supervisor",), exclusive=exclusive, budget=budget, work=hold)
    assert holding.wait(5)
    return jobs, first, done


def test_a_cancel_wakes_a_waiter_at_once() -> None:
    """Nobody polls: cancelling the caller's budget wakes the worker waiting for the lock
    and the caller waiting for the worker."""
    run = Budget()
    jobs, first, done = an_editor_holding_the_lock(run.child(Limits()))
    waiting = jobs.start(
        "w2",
        ("supervisor",),
        exclusive=False,
        budget=run.child(Limits()),
        work=lambda _moved: AgentResult(Finished("never"), []),
    )
    threading.Timer(0.3, run.cancel).start()
    started = time.monotonic()
    assert waiting().status == "cancelled"
    assert time.monotonic() - started < 1
    done.set()
    assert first().status == "cancelled"


def test_cancelling_a_budget_cancels_its_children_and_tells_their_waiters() -> None:
    run = Budget()
    worker = run.child(Limits())
    grandchild = worker.child(Limits())
    told: list[str] = []
    unregister = grandchild.on_cancel(lambda: told.append("grandchild"))
    worker.on_cancel(lambda: told.append("worker"))
    unregister()
    run.cancel()
    assert worker.cancelled() and grandchild.cancelled()
    assert told == ["worker"]
    late: list[str] = []
    grandchild.on_cancel(lambda: late.append("at once"))
    assert late == ["at once"]


def test_a_worker_out_of_time_while_it_waits_for_the_workspace_times_out() -> None:
    jobs, first, done = an_editor_holding_the_lock(Budget())
    started = time.monotonic()
    waited = jobs.start(
        "w2",
        ("supervisor",),
        exclusive=False,
        budget=Budget(max_seconds=0.3),
        work=lambda _moved: AgentResult(Finished("never"), []),
    )()
    assert waited.status == "timeout" and "waited for the workspace" in waited.reason
    assert time.monotonic() - started < 3
    done.set()
    assert first().status == "completed"


def test_a_batch_of_readers_takes_one_thread_per_worker_and_no_more(
    workspace: Path, tmp_path: Path
) -> None:
    counts: list[int] = []

    def count(_messages: list[Message]) -> AssistantTurn:
        counts.append(threading.active_count())
        time.sleep(0.3)  # all three are running at once
        return AssistantTurn(text="seen")

    looks = ["look one", "look two", "look three"]
    scripts: dict[str, list[Step]] = {
        "the job": [calls(*(delegate("explorer", look) for look in looks)), say("ok")],
        **{look: [count] for look in looks},
    }
    before = threading.active_count()
    result, _, _ = run_session(workspace, tmp_path, scripts)
    assert result.outcome == Finished("ok")
    assert max(counts) <= before + len(looks), "a worker's thread is the only one it gets"


def test_the_workers_of_an_editor_never_overlap_an_editor_with_readers(
    workspace: Path, tmp_path: Path
) -> None:
    """`lead` may delegate and is not read-only: it holds the lock, and its own batch of
    readers and an editor shares a lock of its own by the same rules."""
    scripts: dict[str, list[Step]] = {
        "the job": [call("delegate", profile="lead", task="lead it"), say("ok")],
        "lead it": [
            calls(
                delegate("explorer", "look one"),
                delegate("writer", "write"),
                delegate("explorer", "look two"),
            ),
            say("led"),
        ],
        "look one": [call("read_file", path="out.txt"), say("seen")],
        "look two": [call("read_file", path="out.txt"), say("seen")],
        "write": [call("write_file", path="out.txt", content="whole"), say("written")],
    }
    (workspace / "out.txt").write_text("before")
    result, records, _ = run_session(workspace, tmp_path, scripts, latency=0.2)
    assert result.outcome == Finished("ok")
    ids = {s["task"]: s["child_id"] for s in of(records, "delegate_start")}
    writing = interval(records, ids["write"])
    for look in ("look one", "look two"):
        start, end = interval(records, ids[look])
        assert end <= writing[0] or start >= writing[1], f"{look!r} ran while the editor wrote"


def test_report_is_built_by_the_harness(workspace: Path, tmp_path: Path) -> None:
    scripts: dict[str, list[Step]] = {
        "the job": [call("delegate", profile="writer", task="change things"), say("ok")],
        "change things": [say("I changed everything and all tests pass!")],
    }
    _, records, model = run_session(workspace, tmp_path, scripts)
    report = tool_answers(model, "the job", 1)[0]
    assert report.startswith("worker w1 (writer): completed after 1 step,")
    assert "files changed: none" in report
    end = of(records, "delegate_end")[0]
    assert end["files_changed"] == [] and end["status"] == "completed"


def test_read_only_ceiling_refuses_editors(workspace: Path, tmp_path: Path) -> None:
    scripts: dict[str, list[Step]] = {
        "the job": [call("delegate", profile="writer", task="write"), say("ok")],
    }
    _, records, model = run_session(workspace, tmp_path, scripts, ceiling=Ceiling(read_only=True))
    answer = tool_answers(model, "the job", 1)[0]
    assert answer == "not started: this run is read-only and 'writer' can change files"
    assert not of(records, "delegate_start")
    schema = model.seen("the job")[0]
    assert schema  # the supervisor was told only about the explorer
    assert "writer" not in model.seen("the job")[0][0]["content"]


def test_profiles_ceiling_and_unknown_profile(workspace: Path, tmp_path: Path) -> None:
    scripts: dict[str, list[Step]] = {
        "the job": [calls(delegate("writer", "w"), delegate("nope", "n")), say("ok")],
    }
    _, _, model = run_session(
        workspace, tmp_path, scripts, ceiling=Ceiling(profiles=frozenset({"explorer"}))
    )
    refused, unknown = tool_answers(model, "the job", 1)
    assert "this run allows only the profiles explorer" in refused
    assert "there is no profile 'nope'" in unknown


def test_effective_tools_are_logged_and_the_supervisor_cannot_edit(
    workspace: Path, tmp_path: Path
) -> None:
    scripts: dict[str, list[Step]] = {
        "the job": [
            call("write_file", path="x.txt", content="x"),
            call("delegate", profile="explorer", task="t"),
            say("ok"),
        ],
        "t": [say("fine")],
    }
    _, records, model = run_session(workspace, tmp_path, scripts)
    assert "unknown tool 'write_file'" in tool_answers(model, "the job", 1)[0]
    assert not (workspace / "x.txt").exists()
    start = of(records, "delegate_start")[0]
    assert start["tools"] == ["read_file", "list_dir", "grep", "find_files"]
    assert start["parallel_safe"] is True


def test_nesting_is_capped_by_depth(workspace: Path, tmp_path: Path) -> None:
    scripts: dict[str, list[Step]] = {
        "the job": [call("delegate", profile="lead", task="lead 1"), say("ok")],
        "lead 1": [call("delegate", profile="lead", task="lead 2"), say("lead 1 done")],
        "lead 2": [call("delegate", profile="lead", task="lead 3"), say("lead 2 done")],
    }
    _, records, model = run_session(workspace, tmp_path, scripts)
    # lead 2 sits at depth 2, the cap: it is not given the delegate tool at all.
    assert "unknown tool 'delegate'" in tool_answers(model, "lead 2", 1)[0]
    assert of(records, "agent_start", agent_id="w2")[0]["parent_id"] == "w1"
    assert "delegate" not in of(records, "agent_start", agent_id="w2")[0]["tools"]


def test_worker_count_is_capped(workspace: Path, tmp_path: Path) -> None:
    scripts: dict[str, list[Step]] = {
        "the job": [calls(delegate("explorer", "a"), delegate("explorer", "b")), say("ok")],
        "a": [say("A")],
        "b": [say("B")],
    }
    _, _, model = run_session(workspace, tmp_path, scripts, ceiling=Ceiling(max_workers=1))
    answers = tool_answers(model, "the job", 1)
    # The two run in parallel: whichever the pool starts first takes the one place.
    assert sum("maximum of 1 workers" in a for a in answers) == 1
    assert sum(a.endswith(("A", "B")) for a in answers) == 1


def test_the_run_budget_covers_workers_and_refuses_the_next_one(
    workspace: Path, tmp_path: Path
) -> None:
    heavy = AssistantTurn(text="spent it all", usage=Usage(5000, 100))
    scripts: dict[str, list[Step]] = {
        "the job": [
            call("delegate", profile="explorer", task="big"),
            call("delegate", profile="explorer", task="next"),
        ],
        "big": [heavy],
    }
    result, records, _ = run_session(workspace, tmp_path, scripts, max_tokens=1000)
    assert of(records, "delegate_end")[0]["tokens"] == 5100
    assert len(of(records, "delegate_start")) == 1
    assert result.outcome.__class__.__name__ == "LimitHit"
    assert of(records, "session_end")[0]["tokens"] == 5100 + 15


def test_each_terminal_state_reaches_the_caller(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduler, "TIMEOUT_GRACE_S", 0.2)
    monkeypatch.setattr(scheduler, "SHUTDOWN_WAIT_S", 0.5)
    scripts: dict[str, list[Step]] = {
        "the job": [
            calls(
                delegate("explorer", "works"),
                delegate("explorer", "breaks"),
                delegate("quick", "loops"),
                delegate("hanger", "hangs"),
                delegate("coder", "edits"),
            ),
            say("ok"),
        ],
        "works": [say("fine")],
        "breaks": [ModelError("auth", "the endpoint refused the API key (401)")],
        "loops": [call("list_dir"), call("list_dir")],
        "hangs": [call("hang")],
    }
    started = time.monotonic()
    _, records, model = run_session(workspace, tmp_path, scripts)
    assert time.monotonic() - started < 15
    task_of = {r["child_id"]: r["task"] for r in of(records, "delegate_start")}
    statuses = {task_of[e["child_id"]]: e["status"] for e in of(records, "delegate_end")}
    assert statuses == {
        "works": "completed",
        "breaks": "failed",
        "loops": "limit",
        "hangs": "timeout",
        "edits": "failed",
    }
    answers = tool_answers(model, "the job", 1)
    assert "reason: the endpoint refused the API key (401)" in answers[1]
    assert "reason: steps limit" in answers[2]
    assert "timeout" in answers[3]
    assert "timeout after 1 step," in answers[3], "how far it got, though abandoned"
    # A coder never runs on the host: here its container is refused for a root-owned workspace.
    assert "runs in Docker and never on the host" in answers[4] or "never run as root" in answers[4]


def test_cancel_stops_every_worker_and_the_log_says_so(workspace: Path, tmp_path: Path) -> None:
    def slow(_messages: list[Message]) -> AssistantTurn:
        time.sleep(0.3)
        return call("list_dir", path=str(time.monotonic()))

    scripts: dict[str, list[Step]] = {
        "the job": [calls(delegate("explorer", "a"), delegate("explorer", "b")), say("never")],
        "a": [slow] * 20,
        "b": [slow] * 20,
    }

    def cancel_soon(session: Session) -> None:
        # What Ctrl-C does: cancel the top agent's budget, and with it every worker's.
        threading.Timer(0.8, session.cancel).start()

    result, records, _ = run_session(workspace, tmp_path, scripts, on_session=cancel_soon)
    assert result.outcome.__class__.__name__ == "Aborted"
    assert sorted(e["status"] for e in of(records, "delegate_end")) == ["cancelled", "cancelled"]
    assert {e["status"] for e in of(records, "agent_end")} == {"cancelled"}
    assert of(records, "session_end")[0]["status"] == "cancelled"


def test_the_log_is_one_tree(workspace: Path, tmp_path: Path) -> None:
    scripts: dict[str, list[Step]] = {
        "the job": [calls(delegate("explorer", "a"), delegate("explorer", "b")), say("ok")],
        "a": [call("list_dir"), say("A")],
        "b": [say("B")],
    }
    _, records, _ = run_session(workspace, tmp_path, scripts)
    for record in records:
        assert {"ts", "event", "session_id", "agent_id"} <= record.keys()
        if record["agent_id"] != "supervisor":
            assert record["parent_id"] == "supervisor" and record["profile"] == "explorer"
    start = of(records, "delegate_start")[0]
    assert start["agent_id"] == "supervisor" and start["child_id"] == "w1" and start["task"] == "a"
    end = of(records, "delegate_end", child_id="w1")[0]
    assert {"status", "tokens", "steps", "tool_calls", "elapsed_s"} <= end.keys()
    lines = [line.plain for line in render(records)]
    w1 = next(i for i, line in enumerate(lines) if "▶ explorer (w1)" in line)
    assert lines[w1].startswith("  ") and "list_dir" in lines[w1 + 2]
    json.dumps(records)  # every line is plain JSON


def test_parallel_safe_is_derived_from_the_tools(tmp_path: Path) -> None:
    from workers.assembly.profiles import is_parallel_safe

    profiles = load_profiles([builtin_dir()], BUILTIN_TOOLS)
    read_only = {name: tool.read_only for name, tool in BUILTIN_TOOLS.items()}
    safe = {name: is_parallel_safe(p, read_only) for name, p in profiles.items()}
    assert safe == {
        "coder": False,
        "dispatcher": False,
        "explorer": True,
        "shell": False,
        "supervisor": False,
    }
    # Same name, different tools: the name decides nothing.
    sneaky = profiles["explorer"].model_copy(update={"tools": ["read_file", "run_shell"]})
    assert not is_parallel_safe(sneaky, read_only)


def test_a_worker_report_carries_the_gate_verdict(workspace: Path, tmp_path: Path) -> None:
    scripts: dict[str, list[Step]] = {
        "the job": [
            call("delegate", profile="writer", task="write"),
            say("ok"),
            say("ok!"),
            say("ok!!"),
        ],
        "write": [
            call("write_file", path="out.txt", content="x"),
            say("written"),
            say("really"),
            say("really!"),
        ],
    }
    result, records, model = run_session(workspace, tmp_path, scripts, verify=True)
    report = tool_answers(model, "the job", 1)[0]
    assert (
        "its own test runs: unverified (files were changed and no test ran after the last edit)"
        in report
    )
    assert report.rstrip().endswith(
        "Verification: unverified (files were changed and no test ran after the last edit)"
    )
    # The supervisor's own answer is judged on its workers' evidence too.
    assert isinstance(result.outcome, Finished)
    assert result.outcome.answer.endswith(
        "Verification: unverified (files were changed and no test ran after the last edit)"
    )
    sent_back = [r for r in of(records, "verification") if r["action"] == "sent_back"]
    assert {r["agent_id"] for r in sent_back} == {"w1", "supervisor"}


def test_no_agent_that_delegates_is_offered_as_a_worker(tmp_path: Path) -> None:
    """Profiles are resolved once into specs; `may_delegate` is a field of the spec, so
    the supervisor is offered neither itself nor the dispatcher, whatever their names."""
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "planner.toml").write_text(
        'description = "Plans."\ntools = ["read_file", "delegate"]\nsystem_prompt = "p"\n'
    )
    profiles = load_profiles([builtin_dir(), extra], BUILTIN_TOOLS)
    team = delegation.Team(
        tmp_path,
        RunPlan(
            profiles,
            dict(BUILTIN_TOOLS),
            make_model=lambda *_: None,
            ceiling=Ceiling(read_only=True),
        ),  # type: ignore[arg-type,return-value]
        make_model=lambda *_: None,  # type: ignore[arg-type,return-value]
        make_sandbox=lambda *_: None,  # type: ignore[arg-type,return-value]
        events=Emitter(),
    )
    try:
        specs = team.specs
        assert {n for n, s in specs.items() if s.may_delegate} == {
            "supervisor",
            "dispatcher",
            "planner",
        }
        assert team.delegable() == ["explorer"], "read-only: coder and shell are refused too"
        assert specs["coder"].refusal == "this run is read-only and 'coder' can change files"
        assert specs["coder"].tools == ("read_file", "list_dir", "grep", "find_files")
        tool = team.delegate_tool(delegation.Caller("supervisor", 0, Budget(), Emitter()))
        enum = tool.schema()["function"]["parameters"]["properties"]["profile"]["enum"]
        assert enum == ["explorer"]
    finally:
        team.shutdown()


def test_a_reader_cancelled_before_it_takes_the_lock_never_holds_it() -> None:
    """With one reader slot taken, a second reader waits; its caller cancels and stops
    waiting; when the slot frees, the cancelled reader must not take it for good."""
    jobs, first, done = an_editor_holding_the_lock(Budget(), exclusive=False, max_parallel=1)
    run = Budget()
    second = jobs.start(
        "r2",
        ("supervisor",),
        exclusive=False,
        budget=run.child(Limits()),
        work=lambda _moved: AgentResult(Finished("never"), []),
    )
    run.cancel()
    assert second().status == "cancelled"
    done.set()
    assert first().status == "completed"
    editor = jobs.start(
        "e1",
        ("supervisor",),
        exclusive=True,
        budget=Budget(max_seconds=3),
        work=lambda _moved: AgentResult(Finished("wrote"), []),
    )
    assert editor().status == "completed", "no slot was left held by the cancelled reader"


def test_readers_at_once_are_no_more_than_the_local_server_serves() -> None:
    """On the bundled model's server (one slot), a fan-out past it queues in gaffer; on
    an endpoint, `max_parallel` says how many it takes at once."""
    from supervisor.local import server as local_server
    from supervisor.run_setup import workers_at_once
    from supervisor.settings import Settings

    none_set = Settings(max_parallel=4)
    assert workers_at_once(none_set, use_local=False) == local_server.SLOTS == 1
    assert (
        workers_at_once(Settings(max_parallel=4, workers_local=True, base_url="http://h/v1"), False)
        == 1
    )
    assert workers_at_once(Settings(max_parallel=6, base_url="http://h/v1"), use_local=False) == 6
    assert workers_at_once(Settings(max_parallel=6, base_url="http://h/v1"), use_local=True) == 1
