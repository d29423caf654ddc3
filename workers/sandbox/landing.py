"""What a container made reaches the workspace by default-deny: a file it created or
changed lands only when it is plain source or text. Everything else is moved aside into
the state folder's quarantine when the container is gone (guard.sweep), named in the
worker's report with the one line that takes it back:

- a binary (an ELF object, an extension module beside its `.py`, anything with a NUL in
  its first bytes), or a file whose executable bit the container set;
- anything in a `*.dist-info` or `*.egg-info` (an `entry_points.txt` there makes pytest
  load a plugin), compiled caches, interpreter start-up files (host_runs.py);
- a link out of the workspace, a FIFO or socket;
- anything git ignores that the container created (`*.so` next to `calc.py` is exactly
  what a `.gitignore` hides from `git status`).

Why a sweep and not an overlay over ignored paths: an overlay needs privileges the
container does not have, and ignored paths that do not exist yet (a new `build/`) have
nothing to lay it over. What the container changed is found by ctime instead: the kernel
sets it on every write, chmod and rename, and no process can set it back, so a file whose
ctime is later than the survey was changed while the container could run. The user's own
files changed in that window are judged too; what is held back is kept, never deleted.
"""

from __future__ import annotations

import fnmatch
import os
import shlex
import shutil
import stat
from collections.abc import Iterable

from workers.host_runs import command_folders, join, runs_on_its_own
from workers.tools.git_paths import run_git

# Enough of a file to see a NUL or an object file's magic; text never has either.
HEAD_BYTES = 8192
PACKAGE_METADATA = (".dist-info", ".egg-info")
COMPILED_CACHES = (".pyc", ".pyo")
OBJECT_MAGIC = (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"MZ\x90\x00")
# Paths git is asked about one at a time when it will not answer for all at once (a path
# inside a submodule fails the lot); past this, the rest are taken for ignored.
MAX_ASKED_ALONE = 2000

# What a profile's `keep_built` (the user's own config) lets land: build outputs, never
# what the host runs on its own, package metadata or a link out.
BUILT = frozenset(
    {
        "a compiled program or library",
        "a binary",
        "made executable",
        "git ignores it, and the container made or changed it",
    }
)

Folders = Iterable[tuple[str, list[os.DirEntry[str]]]]


def held_back(
    root: str,
    folders: Folders,
    *,
    since_ns: int,
    until_ns: int | None,
    executables: frozenset[str],
    existing: frozenset[str] | None,
    keep_built: tuple[str, ...] = (),
    unreadable: list[str] | None = None,
) -> dict[str, str]:
    """Each path the container made or changed that may not land, with why. A folder it
    made whose every file is held back is named once, for all of them (`.pytest_cache`,
    `build/`, `zz.egg-info`). `existing`: every path there was before (None when not
    known, as for a late sweep: all are taken as new, and what lies in a folder whose
    ctime is in the window is judged)."""
    changed: dict[str, os.stat_result] = {}
    made_folders: list[str] = []
    moved: set[str] = set()  # folders renamed or made in the window (a late sweep's view)
    commands: set[str] = set()
    for rel, entries in folders:
        commands.update(command_folders(rel, {e.name for e in entries}))
        for entry in entries:
            child = join(rel, entry.name)
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            before_end = until_ns is None or info.st_ctime_ns <= until_ns
            in_window = info.st_ctime_ns >= since_ns and before_end
            # A renamed folder's files keep their ctime: a path that was not there is
            # judged whatever its ctime says (`mv docs/x evil-1.dist-info`), unless it
            # changed after the container ended (the user's own, for a late sweep).
            new_here = before_end and (
                child not in existing if existing is not None else rel in moved
            )
            if stat.S_ISDIR(info.st_mode):
                if in_window or new_here:
                    moved.add(child)
                if existing is not None and child not in existing:
                    made_folders.append(child)
            elif in_window or new_here:
                changed[child] = info  # every one: a cap would let what lies past it land
    new = {rel for rel in changed if existing is None or rel not in existing}
    ignored = git_ignored(root, sorted(changed))
    held = _shut(root, unreadable or [], since_ns, until_ns)
    shut = tuple(f"{folder}/" for folder in held)
    for rel, info in changed.items():
        if shut and rel.startswith(shut):
            continue
        facts = (rel in new, rel in executables, rel in ignored)
        why = why_held(root, rel, info, commands, *facts)
        if why and not (why in BUILT and any(fnmatch.fnmatchcase(rel, g) for g in keep_built)):
            held[rel] = why
    return _by_folder(held, set(changed), made_folders)


def _by_folder(held: dict[str, str], changed: set[str], made: list[str]) -> dict[str, str]:
    """`held` with each folder the container made, whose every file is held, in place of
    its files (the shallowest such folder). Linear in files times depth: `npm install`
    makes tens of thousands of files in thousands of folders."""
    made_set = set(made)
    members: dict[str, list[str]] = {}
    for rel in changed:
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            if (folder := "/".join(parts[:depth])) in made_set:
                members.setdefault(folder, []).append(rel)
    named: set[str] = set()
    for folder in sorted(members, key=lambda f: f.count("/")):
        inside = members[folder]
        parts = folder.split("/")
        if any("/".join(parts[:depth]) in named for depth in range(1, len(parts))):
            continue  # a folder above it is named already
        if not all(rel in held for rel in inside):
            continue
        reasons = sorted({held.pop(rel) for rel in inside})
        held[folder] = f"a folder it made, of {len(inside)} file(s): {'; '.join(reasons)}"
        named.add(folder)
    return held


def why_held(
    root: str,
    rel: str,
    info: os.stat_result,
    commands: set[str],
    new: bool,
    was_executable: bool,
    ignored: bool,
) -> str | None:
    """Why a file the container made or changed may not land; None for plain source or
    text in a path git shows."""
    parts = rel.split("/")
    if any(part.endswith(PACKAGE_METADATA) for part in parts):
        return "package metadata (a plugin's entry points)"
    if runs_on_its_own(rel, commands) or "__pycache__" in parts or rel.endswith(COMPILED_CACHES):
        return "the host would run it on its own (a start-up file or compiled cache)"
    if stat.S_ISLNK(info.st_mode):
        return None if _link_stays_inside(root, rel) else "a link out of the workspace"
    if not stat.S_ISREG(info.st_mode):
        return "not a plain file"
    head = _head(os.path.join(root, rel))
    if head is None:
        return "could not be read"
    if head.startswith(OBJECT_MAGIC):
        return "a compiled program or library"
    if b"\0" in head:
        return "a binary"
    if info.st_mode & 0o111 and (new or not was_executable):
        return "made executable"
    if ignored:
        return "git ignores it, and the container made or changed it"
    return None


def take_back_line(path: str, moved_to: str) -> str:
    """The one command that takes a held-back file back into the workspace."""
    return f"mv -n -- {shlex.quote(moved_to)} {shlex.quote(path)}"


def git_ignored(root: str, paths: list[str]) -> set[str]:
    """Which of `paths` git ignores (untracked and matched by an ignore rule); none where
    the workspace is no repository. Where git cannot say, the path is taken for ignored:
    held back and kept is safe, landed unjudged is not."""
    if not paths or shutil.which("git") is None:  # no git: nothing is ignored by it
        return set()
    done = run_git(root, "check-ignore", "--stdin", "-z", input="\0".join(paths).encode())
    if done is not None and done.returncode in (0, 1):
        return {os.fsdecode(p) for p in done.stdout.split(b"\0") if p}
    inside = run_git(root, "rev-parse", "--is-inside-work-tree")
    if inside is not None and inside.returncode != 0 and b"not a git repository" in inside.stderr:
        return set()
    found = set(paths[MAX_ASKED_ALONE:])
    for path in paths[:MAX_ASKED_ALONE]:
        alone = run_git(root, "check-ignore", "-q", "--", path)
        if alone is None or alone.returncode != 1:
            found.add(path)
    return found


def _shut(root: str, unreadable: list[str], since_ns: int, until_ns: int | None) -> dict[str, str]:
    """The folders gaffer could not list that changed while the container ran (it made
    them, or shut them): held whole, since what is in them cannot be judged."""
    held = {}
    for rel in unreadable:
        try:
            changed_ns = os.lstat(os.path.join(root, rel)).st_ctime_ns
        except OSError:
            continue
        if rel != "." and changed_ns >= since_ns and (until_ns is None or changed_ns <= until_ns):
            held[rel] = "a folder gaffer cannot list (its mode shuts the host out)"
    return held


def _link_stays_inside(root: str, rel: str) -> bool:
    target = os.path.realpath(os.path.join(root, rel))
    return target == root or target.startswith(root.rstrip("/") + "/")


def _head(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, HEAD_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
