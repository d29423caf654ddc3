"""The REPL's slash commands and turns, and resuming a run from its log after kill -9."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from supervisor.repl import Repl
from supervisor.resume import rebuild
from supervisor.run_plan import RunPlan
from supervisor.runlog import read_records
from supervisor.session import Session
from tests.fake_openai import FakeOpenAI, Reply
from tests.helpers import add_host_coder, cli_env, kill_9_mid_run
from workers.assembly.profiles import builtin_dir, load_profiles
from workers.model.scripted import RoutedModel, Step, call, say
from workers.tools import BUILTIN_TOOLS


def repl_for(
    workspace: Path, tmp_path: Path, scripts: dict[str, list[Step]]
) -> tuple[Repl, io.StringIO, Session]:
    model = RoutedModel(scripts)
    out = io.StringIO()
    session = Session(workspace, tmp_path / "logs")
    session.start(
        RunPlan(
            profiles=load_profiles([builtin_dir()], BUILTIN_TOOLS),
            tools=dict(BUILTIN_TOOLS),
            make_model=lambda *_: model,
        )
    )
    return Repl(session, Console(file=out, width=200)), out, session


def test_turns_share_one_conversation(workspace: Path, tmp_path: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    scripts: dict[str, list[Step]] = {
        "what is in a.txt?": [
            call("read_file", path="a.txt"),
            say("alpha"),
            say("you asked about a.txt"),
        ]
    }
    repl, _, session = repl_for(workspace, tmp_path, scripts)
    assert repl.handle("what is in a.txt?")
    assert repl.handle("and what did I ask?")
    roles = [m["role"] for m in session.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user", "assistant"]
    session.close()


def test_slash_commands(workspace: Path, tmp_path: Path) -> None:
    (workspace / "AGENT.md").write_text("Use tabs.\n")
    scripts: dict[str, list[Step]] = {"hi": [say("hello")]}
    repl, out, session = repl_for(workspace, tmp_path, scripts)
    repl.handle("hi")
    for line in (
        "/help",
        "/stats",
        "/log 5",
        "/model",
        "/model other-model",
        "/profiles",
        "/memory",
        "/compact",
        "/nope",
    ):
        assert repl.handle(line)
    text = out.getvalue()
    assert "/resume [run]" in text and "per agent" in text and "model: routed" in text
    assert session.model_name == "other-model"
    assert "explorer" in text and "Use tabs." in text and "nothing old enough to compact" in text
    assert "unknown command /nope" in text
    repl.handle("/clear")
    assert session.messages == []
    assert not repl.handle("/exit")
    session.close()


def test_ctrl_c_cancels_the_turn_not_the_session(workspace: Path, tmp_path: Path) -> None:
    def interrupt(_messages: object) -> object:
        raise KeyboardInterrupt

    scripts: dict[str, list[Step]] = {"first": [interrupt, say("second answer")]}  # type: ignore[list-item]
    repl, out, session = repl_for(workspace, tmp_path, scripts)
    repl.handle("first")
    assert "turn cancelled; the session goes on" in out.getvalue()
    repl.handle("again")
    assert session.messages[-1] == {"role": "assistant", "content": "second answer"}
    session.close()


def test_chat_command_reads_piped_lines(workspace: Path) -> None:
    with FakeOpenAI([Reply(text="Hello from the model.")]) as server:
        done = subprocess.run(
            [sys.executable, "-m", "supervisor"],
            input="hi there\n/stats\n/exit\n",
            cwd=workspace,
            env=cli_env(workspace, server, None),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert "Hello from the model." in done.stderr and "per agent" in done.stderr
    assert server.requests[0]["messages"][-1] == {"role": "user", "content": "hi there"}


def test_resume_after_kill_9(workspace: Path) -> None:
    add_host_coder(workspace)
    (workspace / "a.txt").write_text("alpha\n")
    first = [
        Reply(text="Reading.", tool_calls=[("read_file", '{"path": "a.txt"}')]),
        Reply(text="never", delay=30),
    ]
    with FakeOpenAI(first) as server:
        kill_9_mid_run(workspace, server, "--profile", "hostcoder", "summarise a.txt")
    with FakeOpenAI([Reply(text="a.txt says alpha.")]) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "supervisor",
                "run",
                "--profile",
                "hostcoder",
                "--resume",
                "last",
                "go on",
            ],
            cwd=workspace,
            env=cli_env(workspace, server, None),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "a.txt says alpha.\n"
    sent = server.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "user", "assistant", "tool", "user"]
    assert sent[1]["content"] == "summarise a.txt" and sent[4]["content"] == "alpha\n"
    assert '<file path="a.txt">\nalpha\n</file>' in sent[2]["content"], "the attachment too"
    assert sent[3]["tool_calls"][0]["function"]["name"] == "read_file"
    assert sent[-1]["content"] == "go on"
    # Both runs may start in one second, so their ids need not sort in order.
    started = {
        p.stem: read_records(p)[0].get("resumed_from")
        for p in (workspace.parent / "logs").glob("*.jsonl")
    }
    [killed] = [run for run, source in started.items() if source is None]
    assert [source for source in started.values() if source] == [killed]


def test_rebuild_marks_interrupted_calls_and_workers() -> None:
    records = [
        {"event": "user_message", "agent_id": "supervisor", "content": "survey"},
        {
            "event": "llm_call",
            "agent_id": "supervisor",
            "text": "",
            "calls": [
                {
                    "id": "c1",
                    "name": "delegate",
                    "arguments": json.dumps({"profile": "explorer", "task": "a"}),
                },
                {
                    "id": "c2",
                    "name": "delegate",
                    "arguments": json.dumps({"profile": "explorer", "task": "b"}),
                },
            ],
        },
        {
            "event": "delegate_start",
            "agent_id": "supervisor",
            "child_id": "w1",
            "child_profile": "explorer",
            "task": "a",
        },
        {
            "event": "delegate_start",
            "agent_id": "supervisor",
            "child_id": "w2",
            "child_profile": "explorer",
            "task": "b",
        },
        {
            "event": "delegate_end",
            "agent_id": "supervisor",
            "child_id": "w2",
            "status": "completed",
        },
        {
            "event": "tool_call",
            "agent_id": "supervisor",
            "tool_call_id": "c2",
            "content": "report b",
        },
    ]
    rebuilt = rebuild(records)
    assert [m["role"] for m in rebuilt.messages] == ["user", "assistant", "tool", "tool"]
    assert (
        rebuilt.messages[2]["tool_call_id"] == "c1"
        and "interrupted" in rebuilt.messages[2]["content"]
    )
    assert "not replayed" in rebuilt.messages[2]["content"]
    assert rebuilt.messages[3] == {"role": "tool", "tool_call_id": "c2", "content": "report b"}
    assert rebuilt.interrupted_workers == ["w1 (explorer): a"]


def test_chat_habits(workspace: Path, tmp_path: Path) -> None:
    """/stats says the session is in progress; /resume alone lists recent runs; /model
    warns of a name the endpoint does not list; two Ctrl-C at the prompt leave."""
    scripts: dict[str, list[Step]] = {"hi": [say("hello")]}
    repl, out, session = repl_for(workspace, tmp_path, scripts)
    earlier = Session(workspace, tmp_path / "logs")
    earlier.log.close()
    assert repl.handle("hi")
    repl.handle("/stats")
    assert "this session: in progress · 1 turn so far" in out.getvalue()
    assert "running" in out.getvalue() and "interrupted" not in out.getvalue()
    repl.handle("/cost")
    assert "this session so far: unpriced" in out.getvalue(), "a scripted model has no price"
    repl.handle("/resume")
    assert "recent runs (/resume ID, or /resume last):" in out.getvalue()
    model = session.plan.make_model(None)
    model.available_models = lambda: ["gpt-4.1", "gpt-4.1-mini"]  # type: ignore[attr-defined]
    repl.handle("/model gpt-9")
    assert "warning: the endpoint does not list 'gpt-9'; it lists: gpt-4.1, gpt-4.1-mini" in (
        out.getvalue()
    )
    presses = iter([KeyboardInterrupt(), KeyboardInterrupt()])

    def read() -> str:
        raise next(presses)

    repl.loop(read)  # returns: the second Ctrl-C left
    assert "(Ctrl-C again to leave)" in out.getvalue()
    session.close()


def test_always_allow_asks_once_for_the_same_command() -> None:
    from supervisor.asking import ask_user

    answers = iter(["a", "n"])
    asked: list[str] = []

    def read(prompt: str) -> str:
        asked.append(prompt)
        return next(answers)

    approve = ask_user(Console(file=io.StringIO()), read)
    assert approve("make build", "writes files")
    assert approve("make build", "writes files"), "allowed for the session"
    assert not approve("rm -rf build", "deletes files")
    assert len(asked) == 2


def test_chat_takes_resume_and_quiet_as_run_does(workspace: Path) -> None:
    from tests.helpers import gaffer

    with FakeOpenAI([Reply(text="First answer."), Reply(text="Second answer.")]) as server:
        first = gaffer(workspace, "run", "--no-verify", "remember the number 7", server=server)
        assert first.returncode == 0, first.stderr
        done = gaffer(
            workspace,
            "chat",
            "--quiet",
            "--resume",
            "last",
            server=server,
            stdin="what number?\n/exit\n",
        )
    assert done.returncode == 0, done.stderr
    assert "resumed " in done.stderr and "[step" not in done.stderr
    assert "Second answer." in done.stderr, "quiet shows the answers, not the steps"
    sent = json.dumps(server.requests[-1]["messages"])
    assert "remember the number 7" in sent and "what number?" in sent


def test_ctrl_c_during_a_turn_gives_the_prompt_back_at_once(workspace: Path) -> None:
    import os
    import pty
    import select
    import signal
    import time

    def read_until(fd: int, needle: bytes, seconds: float) -> bytes:
        seen, deadline = b"", time.monotonic() + seconds
        while needle not in seen and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    seen += os.read(fd, 65536)
                except OSError:
                    break
        return seen

    replies = [Reply(text="slow", delay=30), Reply(text="Quick answer.")]
    with FakeOpenAI(replies) as server:
        main, child = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "supervisor", "chat", "--no-verify"],
            cwd=workspace,
            env=cli_env(workspace, server, {"TERM": "dumb"}),
            stdin=child,
            stdout=child,
            stderr=child,
            start_new_session=True,
        )
        os.close(child)
        assert b"/help for commands" in read_until(main, b"/help for commands", 30)
        os.write(main, b"take your time\r")
        deadline = time.monotonic() + 30
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        started = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C on the terminal sends
        seen = read_until(main, b"turn cancelled", 10)
        assert b"turn cancelled" in seen and time.monotonic() - started < 3
        os.write(main, b"/exit\r")
        proc.wait(15)
        os.close(main)
    assert proc.returncode == 0


def test_a_bang_runs_the_user_s_command_on_the_host_under_the_agents_policy(
    workspace: Path, tmp_path: Path
) -> None:
    """`!cmd`: a read-only command runs and its output goes into the conversation; one
    outside the allowlist asks, and refused, runs nothing."""
    (workspace / "a.txt").write_text("alpha\n")
    repl, out, session = repl_for(workspace, tmp_path, {})
    repl.handle("!cat a.txt")
    assert "alpha" in out.getvalue()
    assert session.messages[-1]["content"].startswith(
        "[the user ran this on the host: `cat a.txt`]\nalpha"
    )
    repl.handle("!rm a.txt")  # the run plan approves nothing
    assert (workspace / "a.txt").exists() and "denied: the command was not run" in out.getvalue()
    session.close()


def test_tab_completes_a_command_at_the_start_and_a_workspace_path_anywhere(
    workspace: Path, tmp_path: Path
) -> None:
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from supervisor.repl import completer_for

    (workspace / "workers").mkdir()
    (workspace / "workspace_notes.md").write_text("n\n")
    repl, _, session = repl_for(workspace, tmp_path, {})
    completer = completer_for(repl)

    def completions(text: str) -> list[str]:
        found = completer.get_completions(Document(text, len(text)), CompleteEvent())
        return sorted(c.text for c in found)

    assert completions("/un") == ["/undo"] and completions("/re") == ["/redo", "/resume"]
    assert completions("look at wor") == ["kers", "kspace_notes.md"]
    assert completions("!cat works") == ["pace_notes.md"]
    session.close()
