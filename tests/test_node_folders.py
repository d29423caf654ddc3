"""A cluster node's folders (workers/cluster/node.py): checkouts only under a root of the
node user's alone, chowned and removed through folder handles, and swept by the owner
record gaffer wrote in each, never by digits in a name. Each test plays another local
user who got there first."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import must_run_here
from workers import state
from workers.changes.snapshots import Store
from workers.cluster.bundle import make_bundle
from workers.cluster.node import (
    NODE_ROOT_VAR,
    NODES,
    OWNER_RECORD,
    NodeHands,
    new_checkout_folder,
    node_root,
    reap_checkouts,
    sweep_leftovers,
)
from workers.processes import owner_token

OTHER_UID = 1000
"""Another local user, as the attacker was."""
RACE_S = 1.0
"""How long the attacker swaps a folder for a link while the walk runs (the reported
attack won 4 times out of 4 against a path walk)."""
SWAP = """
import os, sys
workspace, outside = sys.argv[1:]
while True:
    for n in range(50):
        target, aside = f"{workspace}/f{n}", f"{workspace}/aside"
        try:
            os.rename(target, aside)
            os.symlink(outside, target)
            os.unlink(target)
            os.rename(aside, target)
        except OSError:
            pass
"""


def need_root() -> None:
    if os.geteuid() != 0:
        must_run_here("making a folder another user's needs root")


def dead_owner() -> str:
    """The owner token of a process that has ended."""
    child = subprocess.Popen(["sleep", "60"])
    token = owner_token(child.pid)
    child.kill()
    child.wait()
    return token


def hands(workspace: Path) -> NodeHands:
    """Hands as the driver places them (without Ray: the actor's own code, in-process)."""
    (workspace / "app.py").write_text("x = 1\n")
    store = Store(workspace)
    bundle = make_bundle(store, store.snapshot()[1])
    return NodeHands(
        bundle, run_id="run1", agent_id="w1", sandbox="host", docker_options={}, uid=None
    )


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder named by GAFFER_NODE_ROOT."""
    folder = tmp_path / "base"
    folder.mkdir()
    monkeypatch.setenv(NODE_ROOT_VAR, str(folder))
    return folder


def test_by_default_checkouts_go_in_the_node_user_s_state_folder(
    monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    monkeypatch.delenv(NODE_ROOT_VAR, raising=False)
    root = node_root()
    assert root == Path(os.path.realpath(state.root())) / NODES
    info = os.lstat(root)
    assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700
    assert info.st_uid == os.geteuid()
    placed = hands(workspace)
    try:
        assert placed.folder.parent == root
        assert (placed.folder / "workspace" / "app.py").read_text() == "x = 1\n"
        assert (placed.folder / OWNER_RECORD).read_text() == owner_token()
    finally:
        placed.close()
    assert not placed.folder.exists()


@pytest.mark.parametrize("made_first", ["by another user", "as a link", "open to all"])
def test_a_node_root_someone_else_made_first_is_never_used(
    base: Path, tmp_path: Path, workspace: Path, made_first: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "20240101-full").mkdir(parents=True)
    planted = base / "gaffer-node"
    if made_first == "as a link":
        planted.symlink_to(elsewhere)
    else:
        planted.mkdir()
        (planted / "20240101-full").mkdir()
        if made_first == "by another user":
            need_root()
            os.chown(planted, OTHER_UID, OTHER_UID)
            os.chmod(planted, 0o700)
        else:
            os.chmod(planted, 0o777)
    before = os.lstat(planted)
    for use in (node_root, sweep_leftovers, lambda: hands(workspace)):
        with pytest.raises(state.UnsafeState, match="gaffer"):
            use()
    after = os.lstat(planted)
    assert (after.st_uid, after.st_mode) == (before.st_uid, before.st_mode), "left as found"
    assert os.listdir(elsewhere) == ["20240101-full"], "nothing removed through the link"
    if made_first != "as a link":
        assert os.listdir(planted) == ["20240101-full"], "nothing made or removed in it"


def test_a_root_under_a_folder_others_may_write_in_is_refused(base: Path) -> None:
    os.chmod(base, 0o777)
    with pytest.raises(state.UnsafeState, match="writable by other users"):
        node_root()
    assert not (base / "gaffer-node").exists()
    os.chmod(base, 0o1777)  # sticky, as /tmp: nobody may rename another's folder there
    assert stat.S_IMODE(os.lstat(node_root()).st_mode) == 0o700


def test_chowning_a_checkout_never_follows_a_link_out(tmp_path: Path, base: Path) -> None:
    need_root()
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret"
    secret.write_text("root's\n")
    os.chmod(secret, 0o600)
    folder = new_checkout_folder(node_root(), "run-w1-")
    workspace = folder / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("x = 1\n")
    (workspace / "secret").symlink_to(secret)
    (workspace / "src" / "swapped").symlink_to(outside)  # a folder swapped for a link
    state.chown_tree(workspace, OTHER_UID, OTHER_UID)
    assert (workspace / "src" / "app.py").stat().st_uid == OTHER_UID
    assert os.lstat(workspace / "src" / "swapped").st_uid == OTHER_UID, "the link itself"
    assert secret.stat().st_uid == 0 and outside.stat().st_uid == 0
    # The whole checkout swapped for a link to the file, or to its folder: nothing is
    # changed through it.
    os.rename(workspace, folder / "was")
    for target in (secret, outside):
        workspace.symlink_to(target)
        with pytest.raises(OSError):
            state.chown_tree(workspace, OTHER_UID, OTHER_UID)
        workspace.unlink()
    assert secret.stat().st_uid == 0 and stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert os.lstat(folder / OWNER_RECORD).st_uid == 0, "the owner record stays gaffer's"


def test_a_folder_swapped_for_a_link_during_the_walk_is_never_entered(tmp_path: Path) -> None:
    need_root()
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret"
    secret.write_text("root's\n")
    os.chmod(secret, 0o600)
    workspace = tmp_path / "workspace"
    for n in range(50):
        (workspace / f"f{n}").mkdir(parents=True)
        (workspace / f"f{n}" / "secret").write_text("theirs\n")
    # The attacker in a process of its own, so it swaps while the walk runs, not between.
    attacker = subprocess.Popen([sys.executable, "-c", SWAP, str(workspace), str(outside)])
    deadline = time.monotonic() + RACE_S
    try:
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):  # a name gone midway stops the walk
                state.chown_tree(workspace, OTHER_UID, OTHER_UID)
    finally:
        attacker.kill()
        attacker.wait()
    assert secret.stat().st_uid == 0 and outside.stat().st_uid == 0


def test_only_checkouts_whose_recorded_owner_is_gone_are_removed(
    tmp_path: Path, base: Path, workspace: Path
) -> None:
    root = node_root()
    dead = dead_owner()
    gone = new_checkout_folder(root, "run-w1-")
    state.write_file(gone, OWNER_RECORD, dead.encode())
    (gone / "workspace").mkdir()
    live = new_checkout_folder(root, "run-w2-")
    dead_pid = dead.split(".")[1]
    named_dead = root / f"{dead_pid}-run-w3-abc"  # an old-style name: its digits a dead pid
    named_dead.mkdir()
    dated = root / "20240101-full"
    dated.mkdir()
    elsewhere = tmp_path / "elsewhere" / "20240101-full"
    elsewhere.mkdir(parents=True)
    (elsewhere / OWNER_RECORD).write_text(dead)  # even with a record there
    (root / f"{dead_pid}-linked").symlink_to(elsewhere)
    borrowed = root / "borrowed"
    borrowed.mkdir()
    (borrowed / OWNER_RECORD).symlink_to(elsewhere / OWNER_RECORD)  # not gaffer's record
    assert reap_checkouts(root) == 1
    assert not gone.exists()
    assert live.is_dir() and named_dead.is_dir() and dated.is_dir() and borrowed.is_dir()
    assert (elsewhere / OWNER_RECORD).read_text() == dead, "nothing removed through a link"
    # Placing hands sweeps the same way: the next stale checkout goes, the rest stay.
    state.write_file(live, OWNER_RECORD, dead.encode())
    placed = hands(workspace)
    placed.close()
    assert not live.exists() and named_dead.is_dir() and elsewhere.is_dir()
