"""The three worked examples of docs/rules-and-hooks.md, each taken from the page as it
is written and run end to end as a user runs gaffer: a formatter after edits in a
worker's container, deny `git push` and `rm -rf`, and a notification when a run ends."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docker_support import require_docker, user_workspace
from tests.fake_openai import Reply
from tests.helpers import add_host_coder, gaffer, gaffer_replying, logged, shell_reply, user_config

PAGE = (Path(__file__).parent.parent / "docs" / "rules-and-hooks.md").read_text()
EXAMPLES = re.findall(r"```toml\n(.*?)```", PAGE.split("## Three worked examples", 1)[1], re.DOTALL)
FORMATTER, DENY, NOTIFY = EXAMPLES


def test_the_page_has_three_worked_examples_that_load() -> None:
    from supervisor import settings

    assert len(EXAMPLES) == 3
    for example in EXAMPLES:
        settings._read_toml("example", example.encode(), refused=set())


def test_the_formatter_runs_where_the_edit_ran_and_undo_takes_its_change_back(
    tmp_path: Path,
) -> None:
    require_docker()
    ws = user_workspace(tmp_path / "ws")
    user_config(ws, FORMATTER)
    write = json.dumps({"path": "app.py", "content": "x = 1   \ny = 2\t\n"})
    done, _ = gaffer_replying(
        ws,
        "run",
        "--profile",
        "coder",
        "--no-verify",
        "write app.py",
        replies=[Reply(tool_calls=[("write_file", write)]), Reply(text="written")],
    )
    assert done.returncode == 0, done.stderr
    assert (ws / "app.py").read_text() == "x = 1\ny = 2\n", "formatted where the edit ran"
    assert [(r["where"], r["decision"]) for r in logged(ws, "hook")] == [("container", "ok")]
    assert "+x = 1\n+y = 2\n" in gaffer(ws, "diff", "last").stdout, "in the change set"
    undone = gaffer(ws, "undo", "--yes")
    assert undone.returncode == 0, undone.stderr
    assert not (ws / "app.py").exists()


def test_git_push_and_rm_rf_are_denied_and_other_rm_asks(workspace: Path) -> None:
    add_host_coder(workspace)
    config = user_config(workspace, DENY)
    (workspace / "build").mkdir()
    (workspace / "old.txt").write_text("old\n")
    tested = gaffer(workspace, "rules", "test", "cd build && rm -rf .")
    assert f"refused: denied by rule deny run_shell(rm -rf:*) in {config}" in tested.stdout
    done, server = gaffer_replying(
        workspace,
        "run",
        "--profile",
        "hostcoder",
        "--yes",
        "--no-verify",
        "tidy up and publish",
        replies=[
            shell_reply("cd build && rm -rf ."),
            shell_reply("git push origin main"),
            shell_reply("rm old.txt"),
            Reply(text="done"),
        ],
    )
    assert done.returncode == 3, done.stderr  # answered, a call denied
    said = [str(server.requests[n]["messages"][-1]["content"]) for n in (1, 2, 3)]
    assert said[0] == f"not run: denied by rule deny run_shell(rm -rf:*) in {config}"
    assert said[1] == f"not run: denied by rule deny run_shell(git push) in {config}"
    assert said[2].startswith(f"not run: it asks first (rule ask run_shell(rm) in {config})")
    assert (workspace / "build").is_dir() and (workspace / "old.txt").exists()


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[bytes]]]:
    """A team's webhook, on 127.0.0.1: what it was sent."""
    received: list[bytes] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.rfile.read(int(self.headers["content-length"])))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    server.shutdown()


def test_a_run_s_end_is_written_down_and_sent_to_the_team(
    workspace: Path, webhook: tuple[str, list[bytes]]
) -> None:
    url, received = webhook
    user_config(workspace, NOTIFY)
    done, _ = gaffer_replying(
        workspace,
        "run",
        "--no-verify",
        "hi",
        replies=[Reply(text="hello")],
        env={"TEAM_WEBHOOK": url},
    )
    assert done.returncode == 0, done.stderr
    [end] = logged(workspace, "session_end")
    runs = (workspace.parent / "home" / "gaffer-runs.txt").read_text()
    assert runs == f"{end['session_id']} completed 0\n"
    [sent] = received
    event = json.loads(sent)
    assert event["event"] == "session_end" and event["exit_code"] == 0
    assert "sk-test" not in sent.decode()
