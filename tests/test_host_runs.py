"""What the host runs without being asked, planted by a sandboxed worker in places git
ignores (workers/host_runs.py): each attack played through the real CLI and a
real container, then followed by what the user runs next on the host."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.docker_support import require_docker, user_workspace
from tests.fake_openai import Reply
from tests.helpers import gaffer_replying, git_status, shell_reply

PLANT_PYC = """python3 - <<'EOF'
import importlib.util, marshal, os, struct
st = os.stat('app.py')
code = compile("open('PWNED-pyc', 'w').write('x')\\n", 'app.py', 'exec')
os.makedirs('__pycache__', exist_ok=True)
header = importlib.util.MAGIC_NUMBER + struct.pack('<III', 0, int(st.st_mtime), st.st_size)
with open('__pycache__/app.cpython-311.pyc', 'wb') as f:
    f.write(header + marshal.dumps(code))
EOF"""
SITE = ".venv/lib/python3.11/site-packages"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    require_docker()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text("GREETING = 'hi'\n")
    (ws / ".gitignore").write_text(".venv/\n__pycache__/\nnode_modules/\n")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(ws / ".venv")], check=True)
    (ws / SITE).mkdir(parents=True, exist_ok=True)
    bin_folder = ws / "node_modules" / ".bin"
    bin_folder.mkdir(parents=True)
    (bin_folder / "jest").write_text("#!/bin/sh\necho the real jest\n")
    (bin_folder / "jest").chmod(0o755)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    return user_workspace(ws)


def records(ws: Path) -> list[dict[str, object]]:
    [log] = sorted((ws.parent / "logs").glob("*.jsonl"))
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_start_up_code_planted_in_ignored_folders_never_runs_on_the_host(ws: Path) -> None:
    commands = [
        f"echo \"import os; open('{ws}/PWNED-pth', 'w')\" > {SITE}/evil.pth",
        f"echo \"open('{ws}/PWNED-site', 'w')\" > {SITE}/sitecustomize.py",
        PLANT_PYC,
        "printf '#!/bin/sh\\ntouch PWNED-jest\\n' > node_modules/.bin/jest; echo tried",
        "mkdir -p sub/node_modules/.bin && ln -s ../../../evil sub/node_modules/.bin/tsc",
        # A folder of its own, not a venv's: a .pth and a sitecustomize.py anywhere go too.
        "mkdir -p lib/site && echo 'import os' > lib/site/x.pth && touch lib/site/sitecustomize.py",
    ]
    replies = [*(shell_reply(c) for c in commands), Reply(text="done")]
    done, _ = gaffer_replying(ws, "run", "--profile", "coder", "--no-verify", "go", replies=replies)
    assert done.returncode == 0, done.stderr
    moved = {r["path"] for r in records(ws) if r.get("action") == "quarantined"}
    # Each is moved aside, itself or with the folder the container made around it.
    assert moved == {"__pycache__", "sub", "lib"}
    for path in ("__pycache__/app.cpython-311.pyc", "sub/node_modules/.bin/tsc", "lib/site/x.pth"):
        assert not os.path.lexists(ws / path)
    [log] = sorted((ws.parent / "logs").glob("*.jsonl"))
    assert log.read_text().count("Read-only file system") >= 3, "the venv and node_modules"
    assert not (ws / SITE / "evil.pth").exists() and not (ws / SITE / "sitecustomize.py").exists()
    assert "moved it aside" in done.stderr
    # What the user runs next, on the host.
    subprocess.run([str(ws / ".venv" / "bin" / "python"), "-c", "pass"], cwd=ws, check=True)
    subprocess.run([sys.executable, "-c", "import app"], cwd=ws, check=True)
    jest = subprocess.run([str(ws / "node_modules/.bin/jest")], capture_output=True, text=True)
    assert jest.stdout == "the real jest\n", "the command folder was read-only inside"
    assert not [p.name for p in ws.iterdir() if p.name.startswith("PWNED")]
    assert "__pycache__" not in git_status(ws)


def test_a_compiled_cache_the_host_wrote_itself_stays(ws: Path) -> None:
    subprocess.run([sys.executable, "-m", "py_compile", "app.py"], cwd=ws, check=True)
    [cached] = (ws / "__pycache__").iterdir()
    before = cached.read_bytes()
    replies = [shell_reply("python3 -c 'import app' && ls __pycache__"), Reply(text="done")]
    done, _ = gaffer_replying(ws, "run", "--profile", "coder", "--no-verify", "go", replies=replies)
    assert done.returncode == 0, done.stderr
    assert cached.read_bytes() == before
    assert not [r for r in records(ws) if r.get("action") == "quarantined"]
    assert "moved it aside" not in done.stderr
    assert os.path.exists(cached)


def test_a_planted_tree_is_taken_out_across_file_systems_fifos_and_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workers.sandbox import guard

    ws = tmp_path / "plain"
    (ws / "sub").mkdir(parents=True)
    before = guard.survey(ws, unshare=False)
    planted = ws / "sub" / ".git"
    (planted / "hooks").mkdir(parents=True)
    (planted / "config").write_text("[core]\n\tfsmonitor = touch PWNED\n")
    os.mkfifo(planted / "hooks" / "pipe")  # a copy would block on it, or fail
    (ws / "sub").chmod(0o555)  # made read-only by the container
    real_rename = os.rename

    def across(source: object, target: object, **fds: int) -> None:
        if "dst_dir_fd" not in fds:  # out to the state folder, on another file system
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real_rename(source, target, **fds)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", across)
    [moved] = guard.sweep(ws, before, "t")
    assert moved.path == "sub/.git" and not planted.exists(), "taken out, FIFO and all"
    kept = Path(moved.moved_to)  # copied through a handle, never removed without its copy
    assert (kept / "config").read_text().startswith("[core]") and not (
        kept / "hooks" / "pipe"
    ).exists()


def test_a_late_sweep_leaves_what_the_user_made_after_the_container_ended(tmp_path: Path) -> None:
    from workers.sandbox import guard

    ws = tmp_path / "plain"
    ws.mkdir()
    before = guard.survey(ws, unshare=False)
    (ws / "planted.pth").write_text("import os\n")
    ended = time.time_ns()
    time.sleep(0.05)
    (ws / "mine" / "__pycache__").mkdir(parents=True)
    (ws / "mine" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"the user's own")
    moved = guard.sweep(ws, before, "late", not_after_ns=ended)
    assert [q.path for q in moved] == ["planted.pth"]
    assert (ws / "mine" / "__pycache__" / "m.cpython-311.pyc").exists()


def test_a_folder_swapped_for_a_link_never_leads_the_sweep_out(
    tmp_path: Path, outside: Path
) -> None:
    from workers.sandbox import SandboxFault
    from workers.sandbox.quarantine import quarantine

    ws = tmp_path / "plain"
    ws.mkdir()
    (outside / ".git").mkdir()  # another repository, the user's own
    (ws / "sub").symlink_to(outside)  # swapped in after the walk found sub/.git planted
    with pytest.raises(SandboxFault, match=r"sub/\.git"):
        quarantine(ws, ["sub/.git"], "race")
    assert (outside / ".git").is_dir(), "nothing outside the workspace was moved"


def test_what_lies_under_a_planted_folder_goes_with_it(tmp_path: Path) -> None:
    from workers.sandbox.quarantine import quarantine

    ws = tmp_path / "plain"
    (ws / "evil" / ".git").mkdir(parents=True)
    (ws / "evil" / "HEAD").write_text("ref: refs/heads/main\n")
    planted = dict.fromkeys(["evil/.git", "evil", "evil/HEAD"], "a repository")
    moved = quarantine(ws, planted, "nested")
    assert [q.path for q in moved] == ["evil"] and not (ws / "evil").exists()
    again = quarantine(ws.parent / "plain", {}, "none")
    assert again == []
