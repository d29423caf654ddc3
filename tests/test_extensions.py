"""Plugins, MCP servers (stdio and Streamable HTTP) and Skills, good and broken."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor.run_plan import RunPlan
from supervisor.session import Session
from tests.fake_openai import FakeOpenAI, Reply
from tests.helpers import cli_env
from workers import trust
from workers.assembly.profiles import HARNESS_TOOLS, builtin_dir, load_profiles
from workers.extensions import Extensions, load_extensions
from workers.log.events import Emitter, Recorder
from workers.model.scripted import RoutedModel, call, say
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import ExtensionArgs, ToolContext, ToolError

SERVER = Path(__file__).parent / "mcp_fixtures" / "calc_server.py"
TAKEN = set(BUILTIN_TOOLS) | HARNESS_TOOLS

GOOD_PLUGIN = """
TOOL_DEF = {
    "name": "word_count",
    "description": "Count the words in a text.",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "read_only": True,
}

def run(text):
    return str(len(text.split()))
"""
BROKEN_PLUGINS = {
    "syntax.py": "def run(:\n",
    "no_def.py": "def run(**args):\n    return 'x'\n",
    "no_run.py": 'TOOL_DEF = {"name": "norun", "description": "d"}\n',
    "explodes.py": "raise RuntimeError('boom at import')\n",
    "exits.py": "import sys\nsys.exit(3)\n",
    "clash_builtin.py": GOOD_PLUGIN.replace("word_count", "read_file"),
    "z_clash_plugin.py": GOOD_PLUGIN,
}


@pytest.fixture(autouse=True)
def isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def trusted(workspace: Path) -> trust.WorkspaceTrust:
    """The workspace after its user ran `gaffer trust --yes` in it."""
    trust.TrustStore(trust.default_store()).approve(workspace, trust.evaluate(workspace).items)
    return trust.evaluate(workspace)


def load(workspace: Path, recorder: Recorder | None = None) -> Extensions:
    events = Emitter([recorder] if recorder else []).bind(session_id="s")
    return load_extensions(
        trusted(workspace), events, taken=TAKEN, log_dir=workspace / ".gaffer" / "logs"
    )


def write_plugins(workspace: Path, files: dict[str, str]) -> None:
    folder = workspace / ".gaffer" / "tools"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def test_good_plugin_becomes_a_tool_with_schema_checks(workspace: Path) -> None:
    write_plugins(workspace, {"word_count.py": GOOD_PLUGIN})
    extensions = load(workspace)
    tool = extensions.tools["word_count"]
    assert (
        tool.read_only
        and tool.origin.startswith("plugin ")
        and tool.origin.endswith("word_count.py")
    )
    assert tool.schema()["function"]["parameters"]["required"] == ["text"]
    assert tool.run(ToolContext(workspace), ExtensionArgs(text="one two three")).output == "3"
    with pytest.raises(
        ToolError, match="invalid arguments for word_count: text: 3 is not of type 'string'"
    ):
        tool.run(ToolContext(workspace), ExtensionArgs(text=3))


def test_broken_plugins_are_skipped_with_one_line_each(workspace: Path) -> None:
    write_plugins(workspace, {"word_count.py": GOOD_PLUGIN, **BROKEN_PLUGINS})
    recorder = Recorder()
    extensions = load(workspace, recorder)
    assert set(extensions.tools) == {"word_count"}
    warnings = "\n".join(extensions.warnings)
    assert len(extensions.warnings) == 7 and all("\n" not in w for w in extensions.warnings)
    assert "syntax.py skipped: SyntaxError" in warnings
    assert "no_def.py skipped: ValueError: it defines no TOOL_DEF dict" in warnings
    assert "no_run.py skipped: ValueError: it defines no run(**args) function" in warnings
    assert "explodes.py skipped: RuntimeError: boom at import" in warnings
    assert "exits.py skipped: it called sys.exit(3) at import" in warnings
    assert "clash_builtin.py skipped: the name 'read_file' is already taken" in warnings
    assert "z_clash_plugin.py skipped: the name 'word_count' is already taken" in warnings
    assert len([r for r in recorder.records if r.get("status") == "skipped"]) == 7


def test_a_plugin_that_exits_in_a_call_fails_that_call_only(workspace: Path) -> None:
    write_plugins(
        workspace,
        {"quits.py": GOOD_PLUGIN.replace("return str(len(text.split()))", "raise SystemExit(4)")},
    )
    tool = load(workspace).tools["word_count"]
    with pytest.raises(ToolError, match=r"the plugin called sys.exit\(4\)"):
        tool.run(ToolContext(workspace), ExtensionArgs(text="a b"))


SKILL = """---
name: release
description: How to cut a release of this project.
---
1. Bump the version in pyproject.toml.
2. Run make test.
"""


def write_skill(
    workspace: Path, folder: str, text: str, extra: dict[str, str] | None = None
) -> None:
    path = workspace / ".gaffer" / "skills" / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "SKILL.md").write_text(text)
    for name, content in (extra or {}).items():
        (path / name).write_text(content)


def test_skills_are_listed_and_opened_and_malformed_ones_reported(workspace: Path) -> None:
    write_skill(workspace, "release", SKILL, {"checklist.md": "- tag it\n"})
    write_skill(workspace, "nofront", "just text\n")
    write_skill(workspace, "badyaml", "---\nname: [unclosed\n---\nbody\n")
    write_skill(workspace, "nodesc", "---\nname: nodesc\n---\nbody\n")
    extensions = load(workspace)
    assert list(extensions.skills) == ["release"]
    assert "- release: How to cut a release of this project." in extensions.prompt()
    assert "Bump the version" not in extensions.prompt()  # names and descriptions only
    warnings = "\n".join(extensions.warnings)
    assert "nofront/SKILL.md skipped: no front matter" in warnings
    assert "badyaml/SKILL.md skipped: front matter is not valid YAML" in warnings
    assert "nodesc/SKILL.md skipped: front matter has no description" in warnings
    use_skill = extensions.use_skill()
    assert use_skill is not None and use_skill.read_only
    opened = use_skill.run(ToolContext(workspace), use_skill.args(name="release"))
    assert opened.output.startswith("1. Bump the version") and "- checklist.md" in opened.output
    with pytest.raises(ToolError, match="no skill 'nope'"):
        use_skill.run(ToolContext(workspace), use_skill.args(name="nope"))


def write_mcp_config(workspace: Path, servers: dict[str, object]) -> None:
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))


def test_stdio_server_tools_are_exposed_read_only_by_hint_and_callable(workspace: Path) -> None:
    write_mcp_config(
        workspace,
        {
            "calc": {"command": sys.executable, "args": [str(SERVER)]},
            "broken": {"command": str(workspace / "no-such-server")},
        },
    )
    recorder = Recorder()
    extensions = load(workspace, recorder)
    try:
        assert {"mcp__calc__add", "mcp__calc__write_note"} <= set(extensions.tools)
        assert extensions.tools["mcp__calc__add"].read_only
        assert not extensions.tools["mcp__calc__write_note"].read_only
        [broken] = [w for w in extensions.warnings if "MCP server 'broken'" in w]
        assert "skipped: it did not start" in broken
        assert "its stderr is in" in broken and broken.endswith("mcp-broken.stderr")
        add = extensions.tools["mcp__calc__add"]
        assert add.run(ToolContext(workspace), ExtensionArgs(a=2, b=40)).output == "42"
        with pytest.raises(ToolError):
            extensions.tools["mcp__calc__fail"].run(
                ToolContext(workspace), ExtensionArgs(reason="no")
            )
        calls = recorder.of("mcp_call")
        assert [(c["tool"], c["is_error"]) for c in calls] == [("add", False), ("fail", True)]
        assert all(
            c["agent_id"] == "mcp" and c["server"] == "calc" and "elapsed_s" in c for c in calls
        )
    finally:
        extensions.close()


def test_user_config_can_override_read_only(workspace: Path, tmp_path: Path) -> None:
    write_mcp_config(workspace, {"calc": {"command": sys.executable, "args": [str(SERVER)]}})
    user = tmp_path / "config" / "gaffer"
    user.mkdir(parents=True)
    (user / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "calc": {"command": sys.executable, "args": [str(SERVER)], "readOnly": False}
                }
            }
        )
    )
    extensions = load(workspace)
    try:
        assert not extensions.tools["mcp__calc__add"].read_only
    finally:
        extensions.close()


def test_the_trust_review_says_a_server_claims_its_tools_only_read(workspace: Path) -> None:
    """`readOnly: true` hands a server's tools to every reader and the supervisor: the
    line the user approves says so, for a command and for a URL."""
    from workers.trust import scan

    write_mcp_config(
        workspace,
        {
            "calc": {"command": "calc-server", "readOnly": True},
            "docs": {"url": "http://127.0.0.1:9/mcp", "readOnly": True},
            "plain": {"command": "plain-server"},
        },
    )
    items, refused = scan(workspace)
    runs = {item.key.rpartition(": ")[2]: item.runs for item in items if item.kind == "mcp"}
    assert refused == []
    assert runs["calc"] == "runs calc-server; " + READ_ONLY_SAID
    assert runs["docs"] == "connects to http://127.0.0.1:9/mcp; " + READ_ONLY_SAID
    assert runs["plain"] == "runs plain-server"


READ_ONLY_SAID = "says its tools only read (readOnly: every read-only agent gets them)"


def test_worker_threads_call_mcp_tools_at_the_same_time(workspace: Path) -> None:
    write_mcp_config(workspace, {"calc": {"command": sys.executable, "args": [str(SERVER)]}})
    extensions = load(workspace)
    echo = extensions.tools["mcp__calc__slow_echo"]
    results: dict[int, str] = {}

    def worker(n: int) -> None:
        results[n] = echo.run(
            ToolContext(workspace), ExtensionArgs(text=f"from {n}", seconds=0.5)
        ).output

    try:
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert results == {n: f"from {n}" for n in range(4)}
        assert time.monotonic() - started < 30
    finally:
        extensions.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_streamable_http_server(workspace: Path, http_server: str) -> None:
    write_mcp_config(workspace, {"remote": {"url": http_server}})
    extensions = load(workspace)
    try:
        assert not extensions.warnings, extensions.warnings
        add = extensions.tools["mcp__remote__add"]
        assert add.origin == "mcp remote" and add.read_only
        assert add.run(ToolContext(workspace), ExtensionArgs(a=1, b=2)).output == "3"
    finally:
        extensions.close()


def test_who_gets_what(workspace: Path, tmp_path: Path) -> None:
    write_plugins(
        workspace,
        {
            "word_count.py": GOOD_PLUGIN,
            "stamp.py": GOOD_PLUGIN.replace("word_count", "stamp").replace(
                '"read_only": True', '"read_only": False'
            ),
        },
    )
    write_mcp_config(workspace, {"calc": {"command": sys.executable, "args": [str(SERVER)]}})
    write_skill(workspace, "release", SKILL)
    extensions = load(workspace)
    try:
        from supervisor.delegation import Team

        tools = {**BUILTIN_TOOLS, **extensions.tools}
        extra = workspace / "p"
        extra.mkdir()
        (extra / "db.toml").write_text(
            'description = "d"\ntools = ["read_file", "mcp__calc__*"]\nsystem_prompt = "p"\n'
        )
        (extra / "boxed.toml").write_text(
            'description = "d"\ntools = ["read_file", "mcp__calc__*", "stamp"]\nsandbox = "docker"\nsystem_prompt = "p"\n'
        )
        profiles = load_profiles([builtin_dir(), extra], tools)
        team = Team(
            workspace,
            RunPlan(profiles, tools, make_model=lambda *_: None),  # type: ignore[arg-type,return-value]
            make_model=lambda *_: None,  # type: ignore[arg-type,return-value]
            make_sandbox=lambda *_: None,  # type: ignore[arg-type,return-value]
            events=Emitter(),
        )
        explorer = team.specs["explorer"].tools
        assert {"word_count", "mcp__calc__add", "mcp__calc__slow_echo"} <= set(explorer)
        assert "stamp" not in explorer and "mcp__calc__write_note" not in explorer
        assert team.specs["explorer"].parallel_safe
        assert "word_count" not in team.specs["coder"].tools
        db = team.specs["db"].tools
        assert {"mcp__calc__add", "mcp__calc__write_note"} <= set(db) and "word_count" not in db
        assert not team.specs["db"].parallel_safe
        # Extension tools run in gaffer's process, so a sandboxed profile never gets them.
        assert team.specs["boxed"].tools == ("read_file",)
        team.shutdown()
    finally:
        extensions.close()


def test_gaffer_run_uses_a_plugin_an_mcp_server_and_a_skill(workspace: Path) -> None:
    write_plugins(workspace, {"word_count.py": GOOD_PLUGIN})
    write_mcp_config(
        workspace,
        {
            "calc": {"command": sys.executable, "args": [str(SERVER)]},
            "gone": {"command": "/no/such/server"},
        },
    )
    write_skill(workspace, "release", SKILL)
    write_plugins(workspace, {"syntax.py": "def run(:\n"})
    trusted(workspace)
    replies = [
        Reply(
            tool_calls=[
                ("use_skill", '{"name": "release"}'),
                ("word_count", '{"text": "a b c"}'),
                ("mcp__calc__add", '{"a": 20, "b": 22}'),
            ]
        ),
        Reply(text="Skill read, 3 words, 42."),
    ]
    with FakeOpenAI(replies) as server:
        done = subprocess.run(
            [sys.executable, "-m", "supervisor", "run", "go"],
            cwd=workspace,
            env={
                **cli_env(workspace, server, None),
                "XDG_CONFIG_HOME": os.environ["XDG_CONFIG_HOME"],
            },
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Skill read, 3 words, 42.\n"
    assert "gaffer: warning: plugin" in done.stderr and "syntax.py skipped" in done.stderr
    assert "MCP server 'gone' skipped" in done.stderr
    first = server.requests[0]
    names = {t["function"]["name"] for t in first["tools"]}
    assert {"use_skill", "word_count", "mcp__calc__add", "delegate"} <= names
    assert "- release: How to cut a release of this project." in first["messages"][0]["content"]
    answers = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert answers[0].startswith("1. Bump the version") and answers[1] == "3" and answers[2] == "42"


def test_session_closes_mcp_servers(workspace: Path, tmp_path: Path) -> None:
    write_mcp_config(workspace, {"calc": {"command": sys.executable, "args": [str(SERVER)]}})
    session = Session(workspace, tmp_path / "logs")
    extensions = load_extensions(
        trusted(workspace), session.events, taken=TAKEN, log_dir=tmp_path / "logs"
    )
    model = RoutedModel({"t": [call("mcp__calc__add", a=1, b=1), say("2")]})
    plan = RunPlan(
        profiles=load_profiles([builtin_dir()], {**BUILTIN_TOOLS, **extensions.tools}),
        tools={**BUILTIN_TOOLS, **extensions.tools},
        make_model=lambda *_: model,
        extensions=extensions,
    )
    assert session.run("t", plan).outcome.__class__.__name__ == "Finished"
    assert extensions.hub is None


def test_a_workspace_server_runs_where_its_files_were_hashed_whatever_the_folder(
    tmp_path: Path,
) -> None:
    """Trusted from the top with `sh tools/serve.sh`: started from `sub/`, the server is
    still the top's `tools/serve.sh`, never an unhashed `sub/tools/serve.sh`."""
    import subprocess

    from tests.helpers import gaffer_replying, trust_workspace

    top = tmp_path / "project"
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    for folder, name in ((top, "top"), (top / "sub", "sub")):
        (folder / "tools").mkdir(parents=True)
        (folder / "tools" / "serve.sh").write_text(f"echo {name} >> {tmp_path}/ran\n")
    servers = {"helper": {"command": "sh", "args": ["tools/serve.sh"]}}
    (top / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    trust_workspace(top)  # as the user would, in the config folder of tmp_path/home
    home = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "home" / ".config")}
    done, _ = gaffer_replying(
        top / "sub", "run", "--no-verify", "hi", replies=[Reply(text="ok")], env=home
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "ran").read_text() == "top\n"
