"""What many tests share: launching the `gaffer` command as a user would, and running one
agent against a scripted model. Test modules import these from here, never from each
other."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.fake_openai import FakeOpenAI, Reply
from workers import trust
from workers.agent import Agent, AgentResult
from workers.aids import aids_for
from workers.assembly.build import guards_for
from workers.limits import Budget, Limits
from workers.log.events import Emitter, Recorder
from workers.loop import run_agent
from workers.model import Message
from workers.model.scripted import ScriptedModel
from workers.sandbox.host import HostSandbox
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import ToolContext

# -- the `gaffer` command ------------------------------------------------------------------


def gaffer(
    workspace: Path,
    *args: str,
    server: FakeOpenAI | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`gaffer ARGS` as a user runs it; `stdin`, when given, is piped in (else nothing)."""
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *args],
        cwd=workspace,
        env=cli_env(workspace, server, env),
        capture_output=True,
        text=True,
        timeout=timeout,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
    )


def cli_env(
    workspace: Path, server: FakeOpenAI | None, extra: dict[str, str] | None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GAFFER_"))}
    env.update(
        HOME=str(workspace.parent / "home"),
        XDG_CONFIG_HOME=str(workspace.parent / "home" / ".config"),
        GAFFER_LOG_DIR=str(workspace.parent / "logs"),
        NO_COLOR="1",
    )
    if server is not None:
        env.update(
            OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="sk-test", GAFFER_MODEL="fake-model"
        )
    env.update(extra or {})
    return env


def interrupted_run(
    workspace: Path, replies: list[Reply], *, once_asked: int
) -> tuple[subprocess.Popen[str], str, float]:
    """`gaffer run survey` against scripted `replies`, sent Ctrl-C once the endpoint has
    been asked `once_asked` times (the calls under way): the process, its stderr, and
    how long it took to end after the signal."""
    with FakeOpenAI(replies) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "supervisor", "run", "survey"],
            cwd=workspace,
            env=cli_env(workspace, server, None),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while len(server.requests) < once_asked and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    return proc, stderr, time.monotonic() - signalled


def outcome_line(stderr: str) -> str:
    """The line that says how a run ended: the last on stderr but the summary line."""
    lines = [line for line in stderr.strip().splitlines() if " · log: " not in line]
    return lines[-1] if lines else ""


def gaffer_replying(
    workspace: Path,
    *args: str,
    replies: list[Reply],
    env: dict[str, str] | None = None,
    routes: dict[str, list[Reply]] | None = None,
) -> tuple[subprocess.CompletedProcess[str], FakeOpenAI]:
    """`gaffer` against a scripted endpoint that gives `replies` in order (and `routes`
    to the workers whose task starts with the key); the endpoint is returned too, with every
    request it received."""
    with FakeOpenAI(replies, routes) as server:
        done = gaffer(workspace, *args, server=server, env=env, timeout=180)
    return done, server


def read_then_write(path: str, content: str) -> Reply:
    """The model's reply that reads a file, then writes it whole."""
    return Reply(
        tool_calls=[
            ("read_file", json.dumps({"path": path})),
            ("write_file", json.dumps({"path": path, "content": content})),
        ]
    )


def shell_reply(command: str) -> Reply:
    """The model's reply that runs one shell command."""
    return Reply(tool_calls=[("run_shell", json.dumps({"command": command}))])


HOST_CODER = """
name = "hostcoder"
description = "Edits files and runs guarded commands on the host."
tools = ["read_file", "write_file", "edit_file", "list_dir", "grep", "find_files", "run_shell"]
system_prompt = "You edit code in {workspace}."
"""


def host_coder_workspace(tmp_path: Path, files: dict[str, str]) -> Path:
    """A git workspace `ws` under `tmp_path` holding `files`, with the host coder profile."""
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    add_host_coder(ws)
    for name, text in files.items():
        (ws / name).write_text(text)
    return ws


def add_host_coder(workspace: Path) -> None:
    """A user's own profile that edits on the host: how these tests reach the file tools.

    It lives in the workspace, so the workspace is trusted, as its user would with
    `gaffer trust`.
    """
    folder = workspace / ".gaffer" / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hostcoder.toml").write_text(HOST_CODER)
    trust_workspace(workspace)


def trust_workspace(workspace: Path) -> None:
    """What `gaffer trust --yes` records, in the config folder `gaffer()` gives its runs."""
    store = workspace.parent / "home" / ".config" / "gaffer" / "trusted.json"
    items = trust.evaluate(workspace, store=store).items
    trust.TrustStore(store).approve(workspace, items)


def started_gaffer(
    workspace: Path, server: FakeOpenAI, *args: str, output: bool = True
) -> subprocess.Popen[str]:
    """`gaffer ARGS` started as a user starts it, against `server`, stdin closed; the
    caller signals it and waits (its output piped, or dropped)."""
    kept = subprocess.PIPE if output else subprocess.DEVNULL
    return subprocess.Popen(
        [sys.executable, "-m", "supervisor", *args],
        cwd=workspace,
        env=cli_env(workspace, server, None),
        stdout=kept,
        stderr=kept,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def wait_for_requests(server: FakeOpenAI, count: int, timeout: float = 30) -> None:
    """Until the endpoint has had `count` requests (or `timeout` seconds passed)."""
    deadline = time.monotonic() + timeout
    while len(server.requests) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def kill_9_mid_run(workspace: Path, server: FakeOpenAI, *args: str, requests: int = 2) -> None:
    """Start `gaffer run`, let it make `requests` model calls, then kill -9 it."""
    proc = started_gaffer(workspace, server, "run", *args, output=False)
    wait_for_requests(server, requests)
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def user_config(workspace: Path, text: str) -> Path:
    """The user's own config file for the runs `gaffer()` makes in `workspace`."""
    config = workspace.parent / "home" / ".config" / "gaffer" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text)
    return config


def logged(workspace: Path, event: str) -> list[dict[str, Any]]:
    """Every line of this event in the logs of the runs `gaffer()` made in `workspace`."""
    found = []
    for path in sorted((workspace.parent / "logs").glob("*.jsonl")):
        lines = (json.loads(line) for line in path.read_text().splitlines())
        found += [record for record in lines if record["event"] == event]
    return found


def git_status(workspace: Path) -> str:
    """`git status --porcelain` as the user runs it in their own checkout."""
    return subprocess.run(
        ["git", "-c", "safe.directory=*", "status", "--porcelain"],
        cwd=workspace,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


# -- at a terminal --------------------------------------------------------------------------


class Terminal:
    """`gaffer ARGS` with a pseudo-terminal for stdin and stderr; stdout piped apart."""

    def __init__(
        self,
        workspace: Path,
        server: FakeOpenAI | None,
        *args: str,
        env: dict[str, str] | None = None,
    ) -> None:
        master, slave = os.openpty()
        self.master = master
        self.process = subprocess.Popen(
            [sys.executable, "-m", "supervisor", *args],
            cwd=workspace,
            env={**cli_env(workspace, server, env), "COLUMNS": "200"},
            stdin=slave,
            stderr=slave,
            stdout=subprocess.PIPE,
            text=True,
        )
        os.close(slave)
        self.seen = ""

    def wait_for(self, text: str, timeout: float = 60) -> str:
        """Everything shown up to `text`'s next appearance."""
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {text!r}; saw:\n{self.seen}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096).decode(errors="replace")
                except OSError:
                    chunk = ""
                assert chunk or text in self.seen, f"the terminal closed; saw:\n{self.seen}"
                self.seen += chunk
        shown, _, self.seen = self.seen.partition(text)
        return shown

    def answer(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def finish(self) -> tuple[int, str]:
        """The exit code and stdout; what the terminal showed last is in `seen`."""
        stdout, _ = self.process.communicate(timeout=60)
        while select.select([self.master], [], [], 0.5)[0]:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # the other end closed: all is read
                break
            if not chunk:
                break
            self.seen += chunk.decode(errors="replace")
        os.close(self.master)
        return self.process.returncode, stdout


# -- one agent, a scripted model ------------------------------------------------------------


def make_agent(
    workspace: Path,
    model: ScriptedModel,
    recorder: Recorder,
    limits: Limits | None = None,
    **kwargs: object,
) -> Agent:
    """An agent on the host with every built-in tool, logging to `recorder`; `kwargs`
    set any other field of Agent, choose its aids as assembly would (`file_blocks`,
    `attach_task_files`, `container_root`), or give it guards (`edits`, `gate`,
    `context`: with the reply and repetition guards, in assembly's order)."""
    limits = limits or Limits()
    tools = kwargs.pop("tools", dict(BUILTIN_TOOLS))
    kwargs.setdefault(
        "aids",
        aids_for(
            tools,  # type: ignore[arg-type]
            kwargs.pop("container_root", None),  # type: ignore[arg-type]
            attach_task_files=bool(kwargs.pop("attach_task_files", False)),
            file_blocks=bool(kwargs.pop("file_blocks", False)),
            tracks_changes=kwargs.get("changes") is not None,
        ),
    )
    kwargs.setdefault(
        "guards",
        guards_for(
            kwargs["aids"],  # type: ignore[arg-type]
            context=kwargs.pop("context", None),  # type: ignore[arg-type]
            edits=kwargs.pop("edits", None),  # type: ignore[arg-type]
            gate=kwargs.pop("gate", None),  # type: ignore[arg-type]
        ),
    )
    return Agent(
        model=model,
        tools=tools,  # type: ignore[arg-type]
        sandbox=kwargs.pop("sandbox", None) or HostSandbox(ToolContext(workspace)),  # type: ignore[arg-type]
        events=Emitter([recorder]).bind(session_id="s1", agent_id="main"),
        limits=limits,
        budget=Budget(limits.max_tokens, limits.max_seconds),
        **kwargs,  # type: ignore[arg-type]
    )


def run_script(
    workspace: Path, script: list[object], limits: Limits | None = None, **kwargs: object
) -> tuple[AgentResult, Recorder, ScriptedModel]:
    """One run of an agent whose model replies with `script`, given the task `task`."""
    model = ScriptedModel(script)  # type: ignore[arg-type]
    recorder = Recorder()
    messages: list[Message] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
    ]
    result = run_agent(make_agent(workspace, model, recorder, limits, **kwargs), messages)
    return result, recorder, model


def run_editor(
    workspace: Path,
    script: list[object],
    task: str,
    *,
    file_blocks: bool = True,
    track_changes: bool = True,
    check: bool = False,
) -> tuple[AgentResult, Recorder, ScriptedModel]:
    """One run of an editing agent on the host as the small-model path makes one (the
    edit guard, the gate, file blocks, every command approved), whose model replies with
    `script`, given `task`; with `check`, gaffer runs the run's check (real Docker) when
    it answers after a change."""
    from workers.changes.snapshots import Store
    from workers.changes.tracker import ChangeTracker
    from workers.check.checker import Checker
    from workers.guards.editing import EditGuard
    from workers.guards.verification import Gate

    model = ScriptedModel(script)  # type: ignore[arg-type]
    recorder = Recorder()
    store = Store(workspace)
    checker = Checker(workspace, store=store) if check else None
    if checker is not None:
        checker.choose(task)
    agent = make_agent(
        workspace,
        model,
        recorder,
        edits=EditGuard(workspace),
        file_blocks=file_blocks,
        changes=ChangeTracker(store) if track_changes else None,
        gate=Gate(
            Emitter([recorder]),
            checker=checker,
            check_task=task,
            workspace=workspace if check else None,
        ),
        sandbox=HostSandbox(ToolContext(workspace, approve=lambda _c, _r: True)),
    )
    messages: list[Message] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": task},
    ]
    return run_agent(agent, messages), recorder, model


def tool_messages(result: AgentResult) -> list[Message]:
    return [m for m in result.messages if m["role"] == "tool"]
