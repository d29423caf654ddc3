"""One outcome, every view: each way a run can end, through the real CLI against a
scripted endpoint, read back from the JSON result, the last stderr line, `gaffer logs`
(the list and the run), `gaffer stats` and the timeline page. Each says the same status
and exit code (supervisor/run_end.py decides them once), and none says "completed" of a
run that did not exit 0."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from supervisor.runlog import read_records
from supervisor.timeline import build
from tests.fake_openai import FakeOpenAI, Reply, error_reply
from tests.helpers import add_host_coder, gaffer, started_gaffer, wait_for_requests

READ = Reply(tool_calls=[("read_file", '{"path": "a.txt"}')])


def _edit_unverified(workspace: Path) -> tuple[list[str], list[Reply], dict[str, list[Reply]]]:
    add_host_coder(workspace)
    (workspace / "calc.py").write_text("x = 1\n")
    edit = json.dumps({"path": "calc.py", "old_text": "x = 1", "new_text": "x = 2"})
    replies = [
        Reply(tool_calls=[("read_file", '{"path": "calc.py"}')]),
        Reply(tool_calls=[("edit_file", edit)]),
        *[Reply(text="Changed x.")] * 3,  # sent back twice for a test run, then accepted
    ]
    return ["--profile", "hostcoder", "--require-verified"], replies, {}


def _failed_worker(_workspace: Path) -> tuple[list[str], list[Reply], dict[str, list[Reply]]]:
    delegate = json.dumps({"profile": "explorer", "task": "look around"})
    replies = [Reply(tool_calls=[("delegate", delegate)]), Reply(text="It could not look.")]
    return [], replies, {"look around": [error_reply(400, "this model cannot do that")]}


RUNS = {
    0: ("completed", lambda _w: ([], [Reply(text="Hello.")], {})),
    1: ("failed", lambda _w: ([], [error_reply(400, "no such thing")], {})),
    2: ("limit", lambda _w: (["--max-steps", "1"], [READ, Reply(text="So far: a.")], {})),
    3: ("incomplete", _failed_worker),
    4: ("unverified", _edit_unverified),
}


def _run(workspace: Path, code: int) -> subprocess.CompletedProcess[str]:
    (workspace / "a.txt").write_text("alpha\n")
    flags, replies, routes = RUNS[code][1](workspace)
    with FakeOpenAI(replies, routes) as server:
        return gaffer(workspace, "run", "--output-format", "json", *flags, "the job", server=server)


def _signalled(workspace: Path, sent: signal.Signals) -> subprocess.CompletedProcess[str]:
    """A run given `sent` while it waits for the model."""
    with FakeOpenAI([Reply(text="never", delay=30)]) as server:
        proc = started_gaffer(workspace, server, "run", "--output-format", "json", "the job")
        wait_for_requests(server, 1)
        time.sleep(0.3)
        proc.send_signal(sent)
        out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _views(workspace: Path) -> dict[str, str]:
    """What `gaffer logs`, `gaffer logs last` and `gaffer stats last` print, and the
    timeline page's outcome, for the one run in the workspace's log folder."""
    [log] = sorted((workspace.parent / "logs").glob("*.jsonl"))
    outcome = build(read_records(log), log).outcome
    return {
        "logs": gaffer(workspace, "logs").stdout,
        "logs last": gaffer(workspace, "logs", "last").stdout,
        "stats": gaffer(workspace, "stats", "last").stdout,
        "timeline": f"{outcome.kind}: {outcome.meaning}",
    }


@pytest.mark.parametrize(
    "code",
    [*RUNS, 130, 143],
)
def test_every_view_says_how_the_run_ended_and_its_exit_code(workspace: Path, code: int) -> None:
    if code in RUNS:
        status, done = RUNS[code][0], _run(workspace, code)
    else:
        sent, status = {130: (signal.SIGINT, "cancelled"), 143: (signal.SIGTERM, "terminated")}[
            code
        ]
        done = _signalled(workspace, sent)
    assert done.returncode == code, done.stderr
    result = json.loads(done.stdout)
    assert (result["status"], result["exit_code"], result["is_error"]) == (status, code, code != 0)
    assert (result["subtype"] == "success") == (code == 0)
    assert result["error_kind"] == {1: "bad_request"}.get(code), "why it failed, for a script"
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"gaffer: {status} · "), last
    said = f"{status} (exit {code})"
    views = _views(workspace)
    assert said in views["logs"] and f"run {said}: " in views["logs last"], views
    assert said in views["stats"], views["stats"]
    assert views["timeline"].startswith(f"{status}: ") and views["timeline"].endswith(
        f"(exit {code})"
    )
    if code != 0:  # a run that did not exit 0 is never called completed
        assert "completed" not in last + views["logs"] + views["stats"] + views["timeline"]
        assert "run completed" not in views["logs last"]


def test_a_usage_error_says_so_in_json_and_on_stderr(workspace: Path) -> None:
    done = gaffer(workspace, "run", "--output-format", "json", "--max-steps", "0", "the job")
    assert done.returncode == 64, done.stderr
    result = json.loads(done.stdout)
    assert (result["status"], result["exit_code"], result["is_error"]) == ("usage_error", 64, True)
    assert result["error_kind"] == "usage"
    assert done.stderr.startswith("gaffer: ") and "completed" not in done.stderr
    assert not (workspace.parent / "logs").exists() or not list(
        (workspace.parent / "logs").glob("*.jsonl")
    ), "a usage error starts no run"
