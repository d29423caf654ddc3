"""gaffer's own state lives outside the workspace (workers/state.py): a repository that
ships a whole planted `.gaffer/` (links for logs, pages, the change store, worktrees and
shell output) changes nothing outside the workspace, whatever the user runs next."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.docker_support import require_docker, user_workspace
from tests.fake_openai import Reply
from tests.helpers import gaffer, gaffer_replying, shell_reply
from workers import state

DEFAULT_LOGS = {"GAFFER_LOG_DIR": ""}


def listing(root: Path) -> dict[str, str]:
    """Every path under root with what it is: a link's target, a file's content."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = "-> " + os.readlink(path)
            elif path.is_file():
                found[rel] = path.read_text(errors="replace")
            else:
                found[rel] = "folder"
    return found


def plant_gaffer_folder(ws: Path, victims: Path) -> None:
    """What a hostile repository ships under `.gaffer/`."""
    for name in ("objects", "shell", "quarantine", "pages"):
        (victims / name).mkdir()
    (victims / "worktrees" / "12345-w1").mkdir(parents=True)  # named like a killed run's copy
    (victims / "keep.txt").write_text("the user's own file\n")
    logs = ws / ".gaffer" / "logs"
    logs.mkdir(parents=True)
    record = {"ts": "2099-01-01T00:00:00", "event": "session_start", "session_id": "x"}
    (logs / "99999999-999999-zzzz.jsonl").write_text(json.dumps(record) + "\n")
    (logs / "99999999-999999-zzzz.html").symlink_to(victims / "pages" / "authorized_keys")
    (logs / "mcp-x.stderr").symlink_to(victims / "keep.txt")
    objects = ws / ".gaffer" / "changes" / "objects"
    objects.mkdir(parents=True)
    for n in range(256):
        (objects / f"{n:02x}").symlink_to(victims / "objects")
    (ws / ".gaffer" / "changes" / "snapshots").symlink_to(victims / "objects")
    (ws / ".gaffer" / "worktrees").symlink_to(victims / "worktrees")
    (ws / ".gaffer" / "shell").symlink_to(victims / "shell")
    (ws / ".gaffer" / "quarantine").symlink_to(victims / "quarantine")


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    require_docker()
    victims = tmp_path / "victims"
    victims.mkdir()
    ws = tmp_path / "repo"
    ws.mkdir()
    (ws / "app.py").write_text("def greet():\n    return 'hi'\n")
    plant_gaffer_folder(ws, victims)
    user_workspace(ws)
    return ws, victims


def test_a_planted_gaffer_folder_changes_nothing_outside_the_workspace(
    planted: tuple[Path, Path],
) -> None:
    ws, victims = planted
    before_victims, before_planted = listing(victims), listing(ws / ".gaffer")
    edit = "sed -i s/hi/bye/ app.py && seq 1 50000 && mkdir -p .gaffer/tools"
    replies = [shell_reply(edit), Reply(text="done")]
    for extra in (DEFAULT_LOGS, {}):  # logs in the state folder, then in --log-dir's
        done, _ = gaffer_replying(
            ws, "run", "--profile", "coder", "--no-verify", "go", replies=replies, env=extra
        )
        assert done.returncode == 0, done.stderr
        assert "bye" in (ws / "app.py").read_text()
        done, _ = gaffer_replying(
            ws,
            *("run", "--profile", "coder", "--no-verify", "--isolate", "go"),
            replies=replies,
            env=extra,
        )
        assert done.returncode == 0, done.stderr
        for command in (["view"], ["logs"], ["diff"], ["undo"], ["stats", "last"]):
            gaffer(ws, *command, env=extra)
        (ws / "app.py").write_text("def greet():\n    return 'hi'\n")
    assert listing(victims) == before_victims, "nothing outside the workspace changed"
    assert listing(ws / ".gaffer") == before_planted, "gaffer wrote nothing in .gaffer"
    logs = state.workspace_dir(ws, state.LOGS)
    assert len(list(logs.glob("*.jsonl"))) == 2 and list(logs.glob("*.html"))
    assert len(list(state.workspace_dir(ws, state.CHANGES, "objects").iterdir())) > 0


def test_old_logs_in_the_workspace_are_never_read_as_gaffer_s_own(
    planted: tuple[Path, Path],
) -> None:
    ws, victims = planted
    listed = gaffer(ws, "logs", env=DEFAULT_LOGS)
    assert "holds 1 run log(s) from an older gaffer; they are not read" in listed.stderr
    assert "zzzz" not in listed.stdout
    viewed = gaffer(ws, "view", env=DEFAULT_LOGS)
    assert viewed.returncode == 1 and "no runs" in viewed.stderr
    assert not list((victims / "pages").iterdir())


def test_the_state_folder_is_the_user_s_own_and_never_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "state"
    home.mkdir()
    (home / "gaffer").symlink_to(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    with pytest.raises(state.UnsafeState, match="a link or a file"):
        state.root()
    (home / "gaffer").unlink()
    (home / "gaffer").mkdir(mode=0o755)
    assert stat.S_IMODE(state.root().stat().st_mode) == 0o700, "made private"
    if os.geteuid() != 0:
        return  # making a folder someone else's needs root
    os.chown(home / "gaffer", 1000, 1000)
    with pytest.raises(state.UnsafeState, match="belongs to uid 1000"):
        state.workspace_dir(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    unusable = {"XDG_STATE_HOME": str(home)}
    ran, server = gaffer_replying(ws, "run", "hi", replies=[Reply(text="x")], env=unusable)
    done = [
        gaffer(ws, "logs", env={**unusable, **DEFAULT_LOGS}),
        ran,  # its logs in --log-dir's folder, but the change store is the state folder's
    ]
    for one in done:
        assert one.returncode == 1 and "gaffer keeps its state only in" in one.stderr
        assert len(one.stderr.strip().splitlines()) == 1, one.stderr
    assert not server.requests


def test_an_isolated_copy_keeps_its_workspace_s_state_folder(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    copy = state.workspace_dir(ws, state.WORKTREES) / "4026531836.1.2-w1"
    copy.mkdir()
    assert state.workspace_dir(copy, state.OUTPUT) == state.workspace_dir(ws, state.OUTPUT)
    assert len(list((state.root() / "workspaces").iterdir())) == 1, "no folder per copy"
