"""An isolated editor's own copy of the workspace: a git worktree at a snapshot of the
current tree, uncommitted and untracked files included, in the workspace's state folder
(workers/state.py), outside the workspace. Its
container mounts the copy instead of the workspace; what it changed there comes back as
a change set (workers/changes/merging.py). The copy is removed when the editor ends, and a
killed run's copies are removed by the next gaffer (the owner named by each copy's name
is proven gone: workers/processes.py).

git only records here (`worktree add --no-checkout`, `read-tree`): it checks nothing
out, so no filter, hook or LFS of the repository runs. The files are written from the
snapshot's kept contents. Outside git, or before the first commit, the copy is a plain
folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from workers import state
from workers.changes.snapshots import LINK_MODE, Store, Tree
from workers.processes import owner_gone, owner_token
from workers.tools.git_paths import run_git

# git must run nothing of the repository's while it makes or removes a copy.
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")
# git's records of worktrees (.git/worktrees/) are not safe to change from two places at
# once: an `add` reads the others' half-written records, a `prune` may remove one.
_GIT_RECORDS = threading.Lock()


@dataclass(frozen=True)
class Worktree:
    path: Path
    base_id: str
    """The workspace's snapshot the copy was made from."""
    base: Tree
    store: Store
    """The copy's snapshots, kept in the workspace's own store."""
    start: Tree
    """The copy as made, listed as the copy is listed: what its change set starts from."""

    def remove(self) -> None:
        remove_worktree(self.store.home, self.path)


class CannotIsolate(Exception):
    """The copy could not be made; one line."""


def make_worktree(store: Store, agent_id: str) -> Worktree:
    """A copy of the workspace as it is now, for `agent_id`. The caller keeps editors
    out while it is made (a reader's hold), so the copy is one moment of the tree."""
    workspace = store.workspace
    try:
        base_id, base = store.snapshot()
        parent = state.workspace_dir(workspace, state.WORKTREES)
    except OSError as error:
        raise CannotIsolate(f"cannot snapshot the workspace for a copy: {error}") from error
    path = parent / f"{owner_token()}-{agent_id}"
    remove_worktree(workspace, path)  # a copy by that name from a pid long reused
    try:
        if _has_commit(workspace):
            with _GIT_RECORDS:
                _git(workspace, "worktree", "add", "--detach", "--no-checkout", str(path), "HEAD")
            _git(path, "read-tree", "HEAD")  # the index, so `git status` shows the edits
        else:
            path.mkdir()
        _write_tree(store, path, base)
        if os.geteuid() == 0:  # root working in a user's checkout: the copy is theirs too
            owner = os.stat(workspace)
            state.chown_tree(path, owner.st_uid, owner.st_gid)
            if (admin := _admin_folder(path)) is not None:  # git checks its owner too
                state.chown_tree(admin, owner.st_uid, owner.st_gid)
    except (OSError, KeyError, CannotIsolate) as error:
        remove_worktree(workspace, path)
        raise CannotIsolate(f"cannot make the copy {path.name}: {error}") from error
    store_of_copy = Store(path, home=workspace)
    try:
        start = store_of_copy.snapshot()[1]
    except OSError as error:
        remove_worktree(workspace, path)
        raise CannotIsolate(f"cannot snapshot the copy {path.name}: {error}") from error
    return Worktree(path, base_id, base, store_of_copy, start)


def remove_worktree(workspace: Path, path: Path) -> None:
    """Remove a copy and git's record of it; quietly when it is already gone."""
    if os.path.lexists(path):
        shutil.rmtree(path, onerror=_writable_and_retry)
    if os.path.isdir(workspace / ".git"):
        with _GIT_RECORDS:
            run_git(workspace, *NO_HOOKS, "worktree", "prune")


def reap_worktrees(workspace: Path) -> list[str]:
    """Remove the copies of runs that were killed (their owner is proven gone); their names."""
    try:
        folder = state.workspace_dir(workspace, state.WORKTREES)
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    removed = []
    for name in names:
        if not owner_gone(name.partition("-")[0]):
            continue
        with contextlib.suppress(OSError):
            remove_worktree(workspace, folder / name)
            removed.append(name)
    return removed


def _has_commit(workspace: Path) -> bool:
    if not os.path.isdir(workspace / ".git"):
        return False
    done = run_git(workspace, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    return done is not None and done.returncode == 0


def _git(root: Path, *args: str) -> None:
    done = run_git(root, *NO_HOOKS, *args, timeout=120)
    if done is None or done.returncode != 0:
        said = os.fsdecode(done.stderr).strip().splitlines() if done is not None else []
        raise CannotIsolate(f"git {args[0]} failed: {said[-1] if said else 'did not run'}")


def _admin_folder(path: Path) -> Path | None:
    """git's record of a worktree (`.git/worktrees/<name>`), named by its `.git` file."""
    try:
        line = (path / ".git").read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    folder = Path(line.removeprefix("gitdir:").strip())
    return folder if line.startswith("gitdir:") and folder.is_dir() else None


def _write_tree(store: Store, root: Path, tree: Tree) -> None:
    """Every file of `tree` under `root`, from the store; a file too large to be kept is
    copied from the workspace, never through a link."""
    for rel, entry in sorted(tree.items()):
        full = root / rel
        parts = rel.split("/")
        for depth in range(1, len(parts)):  # never through a link this copy already holds
            if os.path.islink(root.joinpath(*parts[:depth])):
                raise CannotIsolate(f"{rel} lies under a link in the copy")
        full.parent.mkdir(parents=True, exist_ok=True)
        if entry.mode == LINK_MODE:
            os.symlink(os.fsdecode(store.read(entry.digest)), full)
            continue
        if entry.kept:
            full.write_bytes(store.read(entry.digest))
        else:
            source = store.workspace / rel
            if os.path.realpath(source) != os.path.join(store.workspace, rel):
                raise CannotIsolate(f"{rel} now lies under a link")
            shutil.copyfile(source, full, follow_symlinks=False)
        os.chmod(full, 0o755 if entry.mode == 0o100755 else 0o644)


def _writable_and_retry(function: object, path: str, _error: object) -> None:
    """A folder an agent made read-only is opened up, so its copy can still be removed."""
    with contextlib.suppress(OSError):
        os.chmod(os.path.dirname(path), stat.S_IRWXU)
        if callable(function):
            function(path)
