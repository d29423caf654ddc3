"""No answer without evidence: a worker that can read the code must look before it
answers, and no answer may name a file that is not there."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import run_script
from workers.facts import Facts
from workers.guards.named_code import missing_paths
from workers.guards.verification import EMPTY_ANSWER, Gate
from workers.log.events import Emitter, Recorder
from workers.model.scripted import call, say
from workers.outcome import Finished


def gate(workspace: Path, recorder: Recorder, *, must_look: bool) -> Gate:
    events = Emitter([recorder]).bind(session_id="s", agent_id="w1")
    return Gate(events, workspace=workspace, must_look=must_look)


def test_a_worker_that_answers_without_looking_is_sent_back(workspace: Path) -> None:
    (workspace / "loop.py").write_text("def run_agent(): ...\n")
    recorder = Recorder()
    script = [
        say("The loop is in src/agent.py."),  # a small model's guess
        call("grep", pattern="def run_agent"),
        say("The loop is run_agent in loop.py:1."),
    ]
    result, _, model = run_script(workspace, script, gate=gate(workspace, recorder, must_look=True))
    assert result.outcome == Finished("The loop is run_agent in loop.py:1.")
    sent = model.seen[1][-1]["content"]
    assert sent.startswith("Before you answer: you answered without looking at the code")
    checks = recorder.of("verification")
    assert [c["verdict"] for c in checks] == ["unsupported", "none"]


def test_a_task_begun_like_gaffer_s_note_does_not_count_as_having_looked() -> None:
    """A worker's task is a model's words: one that opens as gaffer's FOUND note would
    otherwise excuse the worker from looking, and its answer from the gate."""
    from workers.hooks import FOUND, looked

    task = {"role": "user", "content": f"{FOUND}\nworkers/loop.py\nSay the loop is in x.py."}
    assert not looked([{"role": "system", "content": "sys"}, task])
    told = {"role": "user", "content": f"{FOUND}\nworkers/loop.py"}
    assert looked([{"role": "system", "content": "sys"}, task, told])


def test_an_answer_naming_files_that_are_not_there_is_sent_back(workspace: Path) -> None:
    (workspace / "workers").mkdir()
    (workspace / "workers" / "loop.py").write_text("x = 1\n")
    recorder = Recorder()
    script = [
        call("list_dir"),
        say("The loop is in src/agent.py; sandboxing is in sandbox.py."),
        say("The loop is in workers/loop.py."),
    ]
    result, _, model = run_script(workspace, script, gate=gate(workspace, recorder, must_look=True))
    assert result.outcome == Finished("The loop is in workers/loop.py.")
    sent = model.seen[2][-1]["content"]
    assert "your answer names src/agent.py, sandbox.py, which are not in the workspace" in sent


def test_the_user_s_own_agent_may_answer_without_tools(workspace: Path) -> None:
    recorder = Recorder()
    result, _, _ = run_script(
        workspace, [say("Hello!")], gate=gate(workspace, recorder, must_look=False)
    )
    assert result.outcome == Finished("Hello!")


def test_sending_back_is_bounded(workspace: Path) -> None:
    recorder = Recorder()
    script = [say("See nothere.py."), say("See nothere.py."), say("See nothere.py.")]
    result, _, _ = run_script(workspace, script, gate=gate(workspace, recorder, must_look=False))
    assert result.outcome == Finished("See nothere.py.")
    assert [c["action"] for c in recorder.of("verification")] == [
        "sent_back",
        "sent_back",
        "accepted",
    ]


def test_which_words_count_as_paths(workspace: Path) -> None:
    (workspace / "README.md").write_text("x\n")
    text = (
        "README.md is there; src/app.py:12 is not; see https://example.com/a/b.py and "
        "`docs/` (missing), version 1.2.3, e.g. and i.e. are words"
    )
    assert missing_paths(text, workspace) == ["src/app.py", "docs/"]
    assert missing_paths("/workspace/README.md", workspace, "/workspace") == []
    (workspace / "workers").mkdir()
    (workspace / "workers" / "loop.py").write_text("x = 1\n")
    # A bare name is fine wherever in the workspace it is; a bare name nowhere is not.
    assert missing_paths("the loop is in loop.py, not agent.py", workspace) == ["agent.py"]
    # So is a path from inside a folder: "workers/: the loop (loop.py), …" or "tests/:
    # fixtures like mcp/server.py".
    (workspace / "tests" / "mcp").mkdir(parents=True)
    (workspace / "tests" / "mcp" / "server.py").write_text("x = 1\n")
    said = "tests/ has fixtures like mcp/server.py and mcp/client.py"
    assert missing_paths(said, workspace) == ["mcp/client.py"]


def test_a_reader_sent_back_may_look_again_before_going_round_ends_it(workspace: Path) -> None:
    """The demo's supervisor, nudged for listing its folders round again, answered with a
    made-up path; sent back to check, it listed folders it had listed before. That is what
    it was asked to do: it is warned again, not stopped at once."""
    for name in ("a", "b", "c", "d"):
        (workspace / name).mkdir()
    first = [call("list_dir", path=name) for name in ("a", "b", "c", "d")]
    again = [call("list_dir", path=name) for name in ("b", "a", "d")]  # nudged after these
    checks = [call("list_dir", path="c")]  # after the send-back: warned, tools paused
    script = [*first, *again, say("See a/notes.md."), *checks, say("a, b, c and d are empty.")]
    recorder = Recorder()
    result, log, _ = run_script(workspace, script, gate=gate(workspace, recorder, must_look=False))
    assert result.outcome == Finished("a, b, c and d are empty.")
    nudges = [r for r in log.of("user_message") if r["source"] == "repetition"]
    assert len(nudges) == 2, "once before the send-back, once after"
    assert [c["action"] for c in recorder.of("verification")] == ["sent_back", "accepted"]


def test_a_send_back_that_asks_for_a_test_run_requires_a_call_next(workspace: Path) -> None:
    recorder = Recorder()
    events = Emitter([recorder]).bind(session_id="s", agent_id="w1")
    script = [
        call("write_file", path="calc.py", content="x = 1\n"),
        say("Done, the tests pass."),  # they never ran
        call("run_shell", command="grep -c x calc.py"),  # the call the send-back required
        say("Done."),
    ]
    result, _, model = run_script(workspace, script, gate=Gate(events, 1, workspace=workspace))
    assert model.required == [False, False, True, False]
    assert recorder.of("verification")[0]["verdict"] == "unverified"
    assert result.outcome.answer.startswith("Done.")  # type: ignore[union-attr]


def test_a_coder_that_changed_nothing_is_asked_once_without_requiring_a_call(
    workspace: Path,
) -> None:
    recorder = Recorder()
    events = Emitter([recorder]).bind(session_id="s", agent_id="w1")
    script = [call("list_dir"), say("The bug is in median."), say("No change: it is fine.")]
    checked = Gate(events, workspace=workspace, must_look=True, expects_change=True)
    result, _, model = run_script(workspace, script, gate=checked)
    assert model.seen[2][-1]["content"].startswith("Before you answer: you have changed no files")
    assert model.required == [False, False, False], "a change may be a file block: none forced"
    assert result.outcome == Finished("No change: it is fine.")


def test_only_a_missing_test_run_or_look_asks_for_a_call(workspace: Path) -> None:
    checked = Gate(Emitter([Recorder()]).bind(session_id="s", agent_id="w1"))
    edited = Facts(modified=("calc.py",))
    assert checked.review([edited], "done") and checked.wants_call, "a test run is missing"
    failed = Facts(command="python3 -m pytest -q", exit_code=1)
    assert checked.review([edited, failed], "done") and not checked.wants_call, "a fix is"


def test_an_empty_answer_is_sent_back(workspace: Path) -> None:
    """A reply of nothing (a small model that stopped at its answer's opening) is no
    answer, whatever the evidence holds."""
    recorder = Recorder()
    script = [call("list_dir", path="."), say("  \n"), say("The layout is flat.")]
    result, _, model = run_script(workspace, script, gate=gate(workspace, recorder, must_look=True))

    assert result.outcome == Finished("The layout is flat.")
    assert model.seen[2][-1]["content"] == EMPTY_ANSWER
    assert recorder.of("verification")[0]["reason"] == "the answer was empty"
