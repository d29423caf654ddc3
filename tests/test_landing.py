"""What a container makes reaches the workspace by default-deny (workers/sandbox/landing.py):
plain source and text land; a compiled extension beside its `.py`, a package's entry
points, an executable, a link out, and anything git ignores that the container made are
moved aside, kept, with the one line that takes them back. Real Docker, playing the
attacker of finding C1: nothing runs at the user's next `import` or `pytest`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.docker_support import chown_tree, require_docker, user_workspace
from workers.limits import Budget
from workers.processes import CLOCK_SLACK_NS
from workers.sandbox import leftovers
from workers.sandbox.docker import DockerSandbox, docker_sandbox
from workers.sandbox.guard import Survey, survey, sweep
from workers.sandbox.landing import take_back_line
from workers.sandbox.options import DockerOptions
from workers.tools import BUILTIN_TOOLS

# A plugin pytest would load from an entry point, and an "extension" Python would import
# ahead of calc.py: each writes a marker when it runs.
PLUGIN = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"


@pytest.fixture(scope="module")
def client() -> Any:
    return require_docker()


def repository(path: Path, ignore: str) -> Path:
    ws = user_workspace(path)
    (ws / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (ws / "README.md").write_text("# calc\n")
    (ws / ".env").write_text("TOKEN=mine\n")
    (ws / ".gitignore").write_text(f".env\n{ignore}")
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(ws), "add", "calc.py", "README.md"], check=True
    )
    chown_tree(ws)
    time.sleep(CLOCK_SLACK_NS / 1e9)  # the user's files are older than a container's window
    return ws


def shell(box: DockerSandbox, command: str) -> str:
    tool = BUILTIN_TOOLS["run_shell"]
    args = tool.args.model_validate({"command": command, "timeout": 60})
    return box.run(tool, args, Budget(max_seconds=90)).output


def in_container(client: Any, ws: Path, command: str) -> list[Any]:
    with docker_sandbox(
        ws, DockerOptions(), run_id="t", agent_id="w1", docker_client=client
    ) as box:
        said = shell(box, command)
        assert "exit code 0" in said, said
    return box.quarantined


ATTACK = (
    # an ELF beside calc.py, which Python imports ahead of the source
    "cp /bin/true calc.cpython-311-x86_64-linux-gnu.so && "
    # a package's metadata naming a pytest plugin
    "mkdir zz.egg-info && printf '[pytest11]\\nzz = zz_plugin\\n' > zz.egg-info/entry_points.txt && "
    "printf 'Metadata-Version: 2.1\\nName: zz\\nVersion: 1\\n' > zz.egg-info/PKG-INFO && "
    "printf {plugin} > zz_plugin.py && "
    # a script made executable, a link out, a binary data file
    "printf '#!/bin/sh\\necho hi\\n' > run.sh && chmod +x run.sh && "
    "ln -s /etc/passwd leak && printf 'a\\0b' > data.bin && "
    # what lands: new and changed source and text, an edit to an ignored file, a link inside
    "printf 'def sub(a, b):\\n    return a - b\\n' > sub.py && echo more >> README.md && "
    "echo TOKEN=changed > .env && ln -s calc.py alias.py"
)


@pytest.mark.parametrize("ignore", ["", "*.so\n*.egg-info/\n"], ids=["plain", "ignored"])
def test_only_plain_source_and_text_land(client: Any, tmp_path: Path, ignore: str) -> None:
    ws = repository(tmp_path / "ws", ignore)
    marker = tmp_path / "plugin-ran"
    plugin = PLUGIN.format(marker=str(marker)).replace("\n", "\\n").replace("'", "'\\''")
    moved = in_container(client, ws, ATTACK.format(plugin=f"'{plugin}'"))
    held = {q.path: q.why for q in moved}
    assert set(held) == {
        "calc.cpython-311-x86_64-linux-gnu.so",
        "zz.egg-info",
        "run.sh",
        "leak",
        "data.bin",
        ".env",  # git ignores it, and the container changed it
    }, held
    assert "compiled" in held["calc.cpython-311-x86_64-linux-gnu.so"]
    assert "package metadata" in held["zz.egg-info"]
    assert held["run.sh"] == "made executable" and "link out" in held["leak"]
    for path in held:
        assert not os.path.lexists(ws / path)
    assert (ws / "sub.py").exists() and (ws / "README.md").read_text() == "# calc\nmore\n"
    assert os.path.islink(ws / "alias.py") and "git ignores it" in held[".env"]
    # The user's next import and pytest run the source and load no plugin.
    subprocess.run(
        [sys.executable, "-c", "import calc; assert calc.__file__.endswith('calc.py')"],
        cwd=ws,
        check=True,
    )
    (ws / "test_calc.py").write_text(
        "from calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=ws,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout
    assert not marker.exists()
    # Everything held back is kept, and its line takes it back.
    so = next(q for q in moved if q.path.endswith(".so"))
    assert Path(so.moved_to).read_bytes() == Path("/bin/true").read_bytes()
    subprocess.run(take_back_line(so.path, so.moved_to), shell=True, cwd=ws, check=True)
    assert (ws / so.path).read_bytes() == Path("/bin/true").read_bytes()


def test_what_git_ignores_and_the_container_made_or_changed_stays_out(
    client: Any, tmp_path: Path
) -> None:
    ws = repository(tmp_path / "ws", "build/\n*.log\n")
    (ws / "old.log").write_text("the user's\n")
    chown_tree(ws)
    moved = in_container(
        client,
        ws,
        "mkdir -p build/lib && echo x > build/lib/a.py && echo y > build/b.txt && "
        "echo new > new.log && echo more >> old.log",
    )
    held = {q.path: q.why for q in moved}
    assert set(held) == {"build", "new.log", "old.log"}, held
    assert "2 file(s)" in held["build"] and "git ignores it" in held["new.log"]
    # Changed, though it was there: its new content is kept aside, and lands on the word.
    old = next(q for q in moved if q.path == "old.log")
    assert Path(old.moved_to).read_text() == "the user's\nmore\n"


def test_a_late_sweep_judges_by_the_record(tmp_path: Path) -> None:
    """The reaper sweeps from a record written before the container started (no list of
    what existed): a binary made after it is held back, what changed before is not."""
    ws = repository(tmp_path / "ws", "")
    (ws / "before.bin").write_bytes(b"\0old")
    time.sleep(CLOCK_SLACK_NS / 1e9)
    taken = survey(ws)
    record = Survey.from_json(taken.as_json())
    assert record.started_ns == taken.started_ns and record.existing is None
    (ws / "after.bin").write_bytes(b"\0new")
    (ws / "after.py").write_text("x = 1\n")
    moved = sweep(ws, record, "late")
    assert [q.path for q in moved] == ["after.bin"]
    assert (ws / "before.bin").exists() and (ws / "after.py").exists()


def test_an_older_record_judges_nothing_by_time(tmp_path: Path) -> None:
    ws = repository(tmp_path / "ws", "")
    data = survey(ws).as_json()
    del data["started_ns"], data["executables"]
    (ws / "after.bin").write_bytes(b"\0new")
    assert sweep(ws, Survey.from_json(data), "old") == []
    assert leftovers is not None  # the reaper reads records through Survey.from_json


def test_build_outputs_land_where_the_users_own_profile_says(client: Any, tmp_path: Path) -> None:
    ws = repository(tmp_path / "ws", "*.so\n")
    options = DockerOptions(keep_built=("*.so",))
    with docker_sandbox(ws, options, run_id="t", agent_id="w1", docker_client=client) as box:
        shell(box, "cp /bin/true calc.cpython-311-x86_64-linux-gnu.so && echo x > evil.pth")
    assert [q.path for q in box.quarantined] == ["evil.pth"]  # never what the host runs
    assert (ws / "calc.cpython-311-x86_64-linux-gnu.so").exists()


def test_only_the_users_own_config_may_keep_built_outputs() -> None:
    wider = DockerOptions(keep_built=("*.so",)).wider_than(DockerOptions())
    assert wider == {"keep_built": "keep_built ['*.so'] (allowed: [])"}
    mine = DockerOptions(keep_built=("*.so",))
    assert DockerOptions(keep_built=("*.so",)).wider_than(mine) == {}


@pytest.mark.parametrize("isolate", [False, True], ids=["in place", "isolated"])
def test_a_coders_build_outputs_never_land_through_a_run(
    client: Any, tmp_path: Path, isolate: bool
) -> None:
    """Through `gaffer run`, as a user runs it: a coder's compiled extension and plugin
    entry point stay out of the workspace, in place and with --isolate."""
    import json

    from tests.fake_openai import Reply
    from tests.helpers import gaffer_replying, shell_reply

    ws = repository(tmp_path / "ws", "*.so\n")
    who = ["-c", "user.email=t@t", "-c", "user.name=t", "-c", "safe.directory=*"]
    subprocess.run(["git", *who, "-C", str(ws), "commit", "-qm", "start"], check=True)
    chown_tree(ws)
    build = (
        "cp /bin/true calc.cpython-311-x86_64-linux-gnu.so && mkdir zz.egg-info && "
        "echo '[pytest11]' > zz.egg-info/entry_points.txt && echo 'x = 1' > new.py"
    )
    worker = [shell_reply(build), Reply(text="built")]
    top = [
        Reply(tool_calls=[("delegate", json.dumps({"profile": "coder", "task": "build it"}))]),
        Reply(text="done"),
    ]
    flags = ["--isolate"] if isolate else []
    done, _ = gaffer_replying(
        ws, "run", *flags, "--no-verify", "go", replies=top, routes={"build it": worker}
    )
    assert done.returncode == 0, done.stderr
    assert (ws / "new.py").read_text() == "x = 1\n"
    assert not (ws / "calc.cpython-311-x86_64-linux-gnu.so").exists()
    assert not (ws / "zz.egg-info").exists()
    assert "may not land in the workspace" in done.stderr


SHUT_OUT = """
import sys
from pathlib import Path
from workers.sandbox.guard import survey, sweep
ws = Path(sys.argv[1])
before = survey(ws)
hidden = ws / "hide"
(hidden / "bin").mkdir(parents=True)
(hidden / "evil.pth").write_text("import os\\n")
(hidden / "bin" / "python").write_bytes(open("/bin/true", "rb").read())
hidden.chmod(0o100)
print(sorted(q.path for q in sweep(ws, before, "shut")))
"""


def test_a_folder_the_host_cannot_list_is_held_whole(tmp_path: Path) -> None:
    """A container runs as the workspace's owner and can `chmod 100` a folder it made:
    a user who is not root cannot list it, yet programs reach what it holds by name."""
    ws = tmp_path / "ws"  # the owner's own, as a user's checkout is
    ws.mkdir()
    (ws / "calc.py").write_text("x = 1\n")
    # Root without the capabilities that read past a folder's mode: as the user would be.
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-all"]
    done = subprocess.run(
        [*drop, sys.executable, "-c", SHUT_OUT, str(ws)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['hide']"
    assert not (ws / "hide").exists()


def test_when_git_cannot_say_what_it_ignores_the_path_is_held(tmp_path: Path) -> None:
    """A path inside a submodule makes `git check-ignore --stdin` fail for all the others:
    each is asked alone, and one git cannot answer for is taken for ignored."""
    from workers.sandbox.landing import git_ignored

    ws = repository(tmp_path / "ws", "build/\n")
    sub = ws / "sub"
    subprocess.run(["git", "init", "-q", str(sub)], check=True)
    (sub / "f").write_text("f\n")
    who = ["-c", "user.email=t@t", "-c", "user.name=t", "-c", "safe.directory=*"]
    subprocess.run(["git", *who, "-C", str(sub), "add", "f"], check=True)
    subprocess.run(["git", *who, "-C", str(sub), "commit", "-qm", "s"], check=True)
    subprocess.run(["git", *who, "-C", str(ws), "add", "sub"], check=True, capture_output=True)
    found = git_ignored(str(ws), ["build/x.py", "sub/n", "plain.py"])
    assert found == {"build/x.py", "sub/n"}
    plain = tmp_path / "plain"
    plain.mkdir()
    assert git_ignored(str(plain), ["a.py"]) == set(), "no repository: nothing is ignored"


def test_no_number_of_changed_files_lets_one_land_unjudged(tmp_path: Path) -> None:
    """A judge that stopped at a count would let whatever lies past it land: 25,000 files
    the container touched first, then an extension module and a plugin's entry point."""
    ws = repository(tmp_path / "ws", "")
    before = survey(ws)
    for n in range(25_000):
        (ws / f"junk{n}.txt").write_text("x\n")
    (ws / "pkg").mkdir()
    (ws / "pkg" / "calc.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF\x02\x01")
    (ws / "evil-1.0.dist-info").mkdir()
    (ws / "evil-1.0.dist-info" / "entry_points.txt").write_text("[pytest11]\nevil = evil\n")
    held = {q.path for q in sweep(ws, before, "many")}
    assert held == {"pkg", "evil-1.0.dist-info"}


@pytest.mark.parametrize("late", [False, True], ids=["live", "late"])
def test_a_folder_renamed_into_package_metadata_is_judged(tmp_path: Path, late: bool) -> None:
    """Renaming a folder leaves its files' ctime as it was: a harmless `entry_points.txt`
    that landed earlier, renamed into a `.dist-info`, would load a pytest plugin."""
    ws = repository(tmp_path / "ws", "")
    (ws / "docs" / "example").mkdir(parents=True)
    (ws / "docs" / "example" / "entry_points.txt").write_text("[pytest11]\nevil = evil\n")
    (ws / "docs" / "example" / "METADATA").write_text("Name: evil\nVersion: 1\n")
    before = survey(ws)
    if late:
        before = Survey.from_json(before.as_json())
    (ws / "docs" / "example").rename(ws / "evil-1.dist-info")
    held = {q.path for q in sweep(ws, before, "renamed")}
    if late:  # no list of what was there: file by file, in the folder the window touched
        assert held == {"evil-1.dist-info/entry_points.txt", "evil-1.dist-info/METADATA"}
    else:
        assert held == {"evil-1.dist-info"}
    assert not (ws / "evil-1.dist-info" / "entry_points.txt").exists()


def test_what_changed_under_a_read_only_mount_is_the_users(tmp_path: Path) -> None:
    """The container cannot write in an existing virtual environment (mounted read-only):
    a package the user installs there meanwhile stays where they put it."""
    ws = repository(tmp_path / "ws", ".venv/\n")
    site = ws / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (ws / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    time.sleep(CLOCK_SLACK_NS / 1e9)
    before = survey(ws)
    assert ".venv" in before.mounts
    (site / "fast").mkdir()
    (site / "fast" / "_speedups.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF\x02")
    (site / "fast-1.0.dist-info").mkdir()
    (site / "fast-1.0.dist-info" / "METADATA").write_text("Name: fast\n")
    assert sweep(ws, before, "user") == []
    assert (site / "fast" / "_speedups.cpython-311-x86_64-linux-gnu.so").exists()


def test_without_git_nothing_is_taken_for_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where git is not installed, what a container wrote is judged by its kind alone:
    plain text lands (held back as "ignored", every write would be)."""
    from workers.sandbox.landing import git_ignored

    ws = repository(tmp_path / "ws", "*.log\n")
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert git_ignored(str(ws), ["a.log", "b.py"]) == set()
