"""The workspace as it travels to a cluster node: one git bundle of one commit whose
tree is a snapshot (workers/changes/snapshots.py), uncommitted and untracked files included,
no history. It is made in a bare repository of its own with `git fast-import`, so
nothing of the workspace's repository (config, filters, hooks) runs, and checked out on
the node the same way, with every config file but git's defaults left out.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from workers import host_programs
from workers.changes.snapshots import LINK_MODE, Entry, Store, Tree

BUNDLE_TIMEOUT_S = 300
BRANCH = "refs/heads/gaffer-snapshot"


class BundleError(Exception):
    """The bundle could not be made or checked out; one line."""


def git_alone(folder: str | Path, *args: str, stdin: bytes | None = None) -> bytes:
    """git with no config but its defaults and no hooks; its output, or BundleError."""
    env = {
        "PATH": host_programs.safe_path(os.environ.get("PATH", "/usr/bin:/bin")),
        "HOME": str(folder),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "gaffer",
        "GIT_AUTHOR_EMAIL": "gaffer@localhost",
        "GIT_COMMITTER_NAME": "gaffer",
        "GIT_COMMITTER_EMAIL": "gaffer@localhost",
    }
    try:
        done = host_programs.run(
            ["git", "-c", "core.hooksPath=/dev/null", *args],
            cwd=folder,
            env=env,
            input=stdin,
            timeout=BUNDLE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise BundleError(f"git {args[0]} did not run: {error}") from error
    if done.returncode != 0:
        said = os.fsdecode(done.stderr).strip().splitlines()
        raise BundleError(f"git {args[0]} failed: {said[-1] if said else done.returncode}")
    return done.stdout


# Files named like secrets never leave this machine, whatever git's ignore rules say:
# environment files, private keys, credentials of package registries and clouds.
SECRET_NAMES = re.compile(
    r"(^|/)(\.env(\..*)?|\.envrc|\.netrc|\.npmrc|\.pypirc|\.pgpass|\.git-credentials|"
    r"\.terraformrc|id_(rsa|dsa|ecdsa|ed25519)[^/]*|[^/]*\.(pem|key|p12|pfx|keystore|jks)|"
    r"[^/]*\.tfvars(\.json)?|application_default_credentials\.json|"
    r"credentials(\.[^/]*)?|secrets?\.[^/]*)$|(^|/)\.(ssh|aws|gnupg|docker|kube|azure)/",
    re.IGNORECASE,
)


def travelling(store: Store, tree: Tree) -> Tree:
    """What of `tree` goes to the nodes: never a file named like a secret, and, for a
    workspace that is no git repository, nothing its `.gitignore` files ignore."""
    kept = {rel: entry for rel, entry in tree.items() if not SECRET_NAMES.search(rel)}
    if os.path.isdir(store.workspace / ".git"):
        return kept  # the snapshot is what git lists: ignored files are out already
    with tempfile.TemporaryDirectory(prefix="gaffer-ignore-") as git_dir:
        git_alone(git_dir, "init", "-q", "--bare", ".")
        listed = git_alone(
            store.workspace,
            *(f"--git-dir={git_dir}", f"--work-tree={store.workspace}"),
            *("ls-files", "-z", "--others", "--exclude-standard"),
        )
    wanted = {os.fsdecode(p) for p in listed.split(b"\0") if p}
    return {rel: entry for rel, entry in kept.items() if rel in wanted}


def make_bundle(store: Store, tree: Tree) -> bytes:
    """`tree` (a snapshot of `store`'s workspace) as the bytes of a git bundle, of what
    of it may travel (`travelling`)."""
    stream = bytearray(b"commit " + BRANCH.encode() + b"\n")
    stream += b"committer gaffer <gaffer@localhost> 0 +0000\ndata 8\nsnapshot\n"
    for rel, entry in sorted(travelling(store, tree).items()):
        data = _content(store, rel, entry)
        mode = {LINK_MODE: b"120000", 0o100755: b"100755"}.get(entry.mode, b"100644")
        stream += b"M " + mode + b" inline " + _quoted(rel) + b"\n"
        stream += b"data " + str(len(data)).encode() + b"\n" + data + b"\n"
    stream += b"done\n"
    with tempfile.TemporaryDirectory(prefix="gaffer-bundle-") as folder:
        git_alone(folder, "init", "-q", "--bare", ".")
        git_alone(folder, "fast-import", "--quiet", "--done", stdin=bytes(stream))
        git_alone(folder, "bundle", "create", "-q", "snapshot.bundle", BRANCH)
        return Path(folder, "snapshot.bundle").read_bytes()


def check_out(bundle: bytes, folder: Path) -> None:
    """The bundle's snapshot as plain files in `folder` (made here), a repository of its
    own so `git diff` works there."""
    folder.mkdir(parents=True)
    (folder.parent / f"{folder.name}.bundle").write_bytes(bundle)
    try:
        git_alone(folder, "init", "-q", ".")
        git_alone(folder, "fetch", "-q", f"../{folder.name}.bundle", f"{BRANCH}:{BRANCH}")
        git_alone(folder, "checkout", "-q", "-f", BRANCH.removeprefix("refs/heads/"))
        # A .gaffer there (the workspace's config, as shipped) is no change of the worker's.
        (folder / ".git" / "info").mkdir(exist_ok=True)
        (folder / ".git" / "info" / "exclude").write_text(".gaffer/\n")
    finally:
        (folder.parent / f"{folder.name}.bundle").unlink(missing_ok=True)


def _content(store: Store, rel: str, entry: Entry) -> bytes:
    if entry.kept:
        return store.read(entry.digest)
    source = store.workspace / rel  # too large to keep: read now, never through a link
    if os.path.realpath(source) != os.path.join(store.workspace, rel):
        raise BundleError(f"{rel} now lies under a link")
    return source.read_bytes()


def _quoted(path: str) -> bytes:
    """A path as fast-import reads it: C-style quoted when it needs to be."""
    raw = os.fsencode(path)
    if not any(c in raw for c in b'"\\\n') and not raw.startswith(b'"'):
        return raw
    escaped = raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n")
    return b'"' + escaped + b'"'
