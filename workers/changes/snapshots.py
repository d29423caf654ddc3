"""Content-addressed snapshots of a workspace: what every file held at one moment, so
gaffer sees what changed whatever changed it (a file tool, `sed -i` in a container, a
code generator) and can put any of it back.

The store lives in the workspace's state folder (workers/state.py), never in the
workspace, where a repository could plant links into it:
`objects/` holds each content once, compressed, named by its SHA-256; `snapshots/`
one file per distinct tree; `stat-cache` lets a snapshot of an unchanged tree hash
nothing: a file whose size, times, inode and mode are as before keeps its hash.

What is snapshotted: in a git repository, the files git would list (tracked, and
untracked but not ignored); elsewhere every file but the folders no tool looks into
(`.git`, `node_modules`, virtual environments, caches). git is only
asked to list files, with the forced safe config (workers/tools/git_paths.py): nothing
in a hostile repository's config runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from workers import state
from workers.tools.git_paths import run_git
from workers.tools.workspace import SKIPPED_DIRS

# Bigger files are hashed but their content is not kept: a change to one shows in a
# change set, and undoing it is refused by name.
MAX_KEPT_BYTES = 16 * 1024 * 1024
# A file changed this close to when it was hashed may change again with the same
# size and timestamp (timestamps are coarse): it is hashed again next time.
RACY_NS = 2_000_000_000
GIT_LIST_TIMEOUT_S = 60
LINK_MODE = 0o120000


@dataclass(frozen=True)
class Entry:
    """One file as a snapshot saw it."""

    digest: str
    """SHA-256 of the content (of the target, for a symbolic link)."""
    mode: int
    """0o100644, 0o100755 or 0o120000 (a link), as git writes them."""
    size: int
    kept: bool
    """The content is in the store, so it can be put back."""


Tree = dict[str, Entry]
"""Workspace-relative path (with /) to entry."""


class Store:
    """Objects, snapshots and the stat cache of one workspace; safe across threads."""

    def __init__(self, workspace: Path, home: Path | None = None) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.home = self.workspace if home is None else Path(os.path.realpath(home))
        """The workspace whose store this is: an isolated editor's copy (workers/
        worktrees.py) keeps its snapshots in the real workspace's store, so its change
        set can be read, shown and applied there."""
        self.folder = state.workspace_dir(self.home, state.CHANGES)
        self._cache_name = (
            "stat-cache" if self.home == self.workspace else f"stat-cache-{self.workspace.name}"
        )
        self._lock = threading.Lock()
        self._cache: dict[str, list[int | str | bool]] | None = None
        self._cache_dirty = False
        self._checked: dict[str, Path] = {}
        """The store's folders already made and checked (own_folder)."""
        self._saved_id: str | None = None
        self._matches_saved = False
        """Nothing has changed since snapshot `_saved_id` was saved: a snapshot of an
        unchanged tree reuses it instead of writing the whole tree out again."""

    # -- taking a snapshot ---------------------------------------------------------

    def snapshot(self) -> tuple[str, Tree]:
        """The workspace now: its snapshot id and tree. Contents not yet in the store
        are added; the tree is saved under its id."""
        with self._lock:
            tree = self._scan()
            snapshot_id = self._saved_id if self._matches_saved else None
            if snapshot_id is None or not (self.folder / "snapshots" / snapshot_id).exists():
                snapshot_id = self._save_tree(tree)
            if snapshot_id != self._saved_id or not self._matches_saved:
                self._saved_id, self._matches_saved = snapshot_id, True
                self._cache_dirty = True  # the cache now names this snapshot
            self._save_cache()
        return snapshot_id, tree

    def scan(self) -> Tree:
        """The workspace now, contents kept, without saving the tree (for each call)."""
        with self._lock:
            tree = self._scan()
            self._save_cache()
        return tree

    def _scan(self) -> Tree:
        cache = self._load_cache()
        differs = False
        seen: dict[str, list[int | str | bool]] = {}
        tree: Tree = {}
        now_ns = time.time_ns()
        root = str(self.workspace) + "/"
        folders: dict[str, bool] = {"": True}
        for rel in self._paths():
            if not self._real_folder(rel.rpartition("/")[0], folders):
                continue  # under a link: what it points at is not the workspace's
            full = root + rel
            try:
                st = os.lstat(full)
            except OSError:
                continue  # gone since listed, or a tracked file deleted
            if stat.S_ISLNK(st.st_mode):
                mode = LINK_MODE
            elif stat.S_ISREG(st.st_mode):
                mode = 0o100755 if st.st_mode & 0o111 else 0o100644
            else:
                continue  # folders (submodules), sockets, devices
            key: list[int | str | bool] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
            cached = cache.get(rel)
            if cached is not None and cached[:4] == key and cached[4] == mode:
                digest, kept = str(cached[5]), bool(cached[6])
            else:
                entry = self._hash_and_keep(rel, mode, st.st_size)
                if entry is None:
                    continue
                digest, kept = entry
                differs = True
            if now_ns - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS:
                seen[rel] = [*key, mode, digest, kept]
            else:
                differs = True  # not cached: hashed again next time
            tree[rel] = Entry(digest, mode, st.st_size, kept)
        if differs or seen.keys() != cache.keys():
            self._cache_dirty, self._matches_saved = True, False
        self._cache = seen
        return tree

    def _real_folder(self, folder: str, known: dict[str, bool]) -> bool:
        """Whether every folder on the way to `folder` is a real folder, not a link."""
        if folder in known:
            return known[folder]
        parent = folder.rpartition("/")[0]
        real = self._real_folder(parent, known)
        if real:
            try:
                real = stat.S_ISDIR(os.lstat(f"{self.workspace}/{folder}").st_mode)
            except OSError:
                real = False
        known[folder] = real
        return real

    def _hash_and_keep(self, rel: str, mode: int, size: int) -> tuple[str, bool] | None:
        """Hash a file (keeping its content when small enough), opened folder by folder
        without following any link: a link planted mid-path never leads out."""
        try:
            folder_fd = self._open_folder(rel.rpartition("/")[0])
        except OSError:
            return None
        name = rel.rpartition("/")[2]
        try:
            if mode == LINK_MODE:
                data = os.fsencode(os.readlink(name, dir_fd=folder_fd))
            else:
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                fd = os.open(name, flags, dir_fd=folder_fd)
                with os.fdopen(fd, "rb") as file:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        return None  # swapped for a pipe or a device since it was listed
                    if size > MAX_KEPT_BYTES:
                        return hashlib.file_digest(file, "sha256").hexdigest(), False
                    data = file.read(MAX_KEPT_BYTES + 1)
                    if len(data) > MAX_KEPT_BYTES:
                        return None  # grew since it was listed: seen next time
        except OSError:
            return None
        finally:
            os.close(folder_fd)
        digest = hashlib.sha256(data).hexdigest()
        self._keep(digest, data)
        return digest, True

    def keep(self, data: bytes) -> str:
        """Keep a content the harness made itself (a merged file); its digest."""
        digest = hashlib.sha256(data).hexdigest()
        with self._lock:
            self._keep(digest, data)
        return digest

    def _open_folder(self, folder: str) -> int:
        fd = os.open(self.workspace, os.O_RDONLY | os.O_DIRECTORY)
        for part in folder.split("/") if folder else []:
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            finally:
                os.close(fd)
            fd = inner
        return fd

    def own_folder(self, name: str = "") -> Path:
        """The store's folder (or one inside it), made and checked (OSError otherwise)."""
        if name in self._checked:  # checked once per store: every kept object asks
            return self._checked[name]
        folder = state.folder_in(self.folder, *([name] if name else []))
        self._checked[name] = folder
        return folder

    def _keep(self, digest: str, data: bytes) -> None:
        path = self._object_path(digest)
        if path.exists():
            try:
                self.read(digest)
                return
            except KeyError:
                pass  # damaged, or planted by the repository: written again
        self.own_folder("objects")
        path.parent.mkdir(exist_ok=True)
        temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        temp.write_bytes(zlib.compress(data, 1))
        os.replace(temp, path)

    def _paths(self) -> list[str]:
        listed = self._git_paths()
        if listed is None:
            return self._walk()
        # The folders no tool looks into (caches a test run writes, virtual environments)
        # are left out of a repository's listing too, even where git does not ignore them.
        return [p for p in listed if not SKIPPED_DIRS.intersection(p.split("/")[:-1])]

    def _git_paths(self) -> list[str] | None:
        """What git lists here (tracked, or untracked and not ignored), or None when
        this is not a repository or git is missing."""
        done = run_git(
            self.workspace,
            *("ls-files", "-z", "--cached", "--others", "--exclude-standard"),
            # An isolated editor's copy (made by gaffer, its `.git` read-only to the
            # container) is listed whoever owns it; one that is no repository of its own
            # lies inside the workspace's, where it is ignored: it is walked instead.
            trust_owner=self.home != self.workspace,
            timeout=GIT_LIST_TIMEOUT_S,
            only_here=self.home != self.workspace,
        )
        if done is None or done.returncode != 0:
            return None
        return list(dict.fromkeys(os.fsdecode(p) for p in done.stdout.split(b"\0") if p))

    def _walk(self) -> list[str]:
        paths: list[str] = []
        for folder, dirs, files in os.walk(self.workspace):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]  # .gaffer among them
            rel = os.path.relpath(folder, self.workspace)
            base = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            paths.extend(base + name for name in files)
            # A link to a folder is listed as a link, never followed.
            paths.extend(base + d for d in dirs if os.path.islink(os.path.join(folder, d)))
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
        return paths

    # -- reading back --------------------------------------------------------------

    def read(self, digest: str) -> bytes:
        """A kept content, checked against its name; KeyError when the store lacks it."""
        try:
            data = zlib.decompress(self._object_path(digest).read_bytes())
        except (OSError, zlib.error) as error:
            raise KeyError(digest) from error
        if hashlib.sha256(data).hexdigest() != digest:
            raise KeyError(digest)  # damaged, or planted
        return data

    def tree(self, snapshot_id: str) -> Tree:
        """A saved snapshot; KeyError when there is none by that id (or it is damaged)."""
        if not _is_digest(snapshot_id):
            raise KeyError(snapshot_id)
        path = self.folder / "snapshots" / snapshot_id
        try:
            raw = zlib.decompress(path.read_bytes())
        except (OSError, zlib.error) as error:
            raise KeyError(snapshot_id) from error
        if hashlib.sha256(raw).hexdigest() != snapshot_id:
            raise KeyError(snapshot_id)
        try:
            return {p: Entry(d, m, s, k) for p, d, m, s, k in json.loads(raw)}
        except (ValueError, TypeError) as error:
            raise KeyError(snapshot_id) from error

    # -- inside the store -----------------------------------------------------------

    def _object_path(self, digest: str) -> Path:
        if not _is_digest(digest):
            raise KeyError(digest)
        return self.folder / "objects" / digest[:2] / digest[2:]

    def _save_tree(self, tree: Tree) -> str:
        rows = [[p, e.digest, e.mode, e.size, e.kept] for p, e in sorted(tree.items())]
        raw = json.dumps(rows, separators=(",", ":")).encode()
        snapshot_id = hashlib.sha256(raw).hexdigest()
        path = self.folder / "snapshots" / snapshot_id
        if path.exists():
            try:
                self.tree(snapshot_id)
                return snapshot_id
            except (KeyError, ValueError):
                pass  # damaged, or planted by the repository: written again
        self.own_folder("snapshots")
        temp = path.with_name(f".{snapshot_id}.{os.getpid()}.{threading.get_ident()}")
        temp.write_bytes(zlib.compress(raw, 1))
        os.replace(temp, path)
        return snapshot_id

    def _load_cache(self) -> dict[str, list[int | str | bool]]:
        if self._cache is None:
            self._cache = {}
            try:
                loaded = json.loads((self.folder / self._cache_name).read_bytes())
            except (OSError, ValueError):
                loaded = None
            if isinstance(loaded, dict) and isinstance(loaded.get("files"), dict):
                self._cache = loaded["files"]
                saved = loaded.get("snapshot")
                self._saved_id = saved if isinstance(saved, str) else None
                self._matches_saved = self._saved_id is not None
        return self._cache

    def _save_cache(self) -> None:
        if not self._cache_dirty or self._cache is None:
            return
        path = self.own_folder() / self._cache_name
        temp = path.with_name(f".{self._cache_name}.{os.getpid()}.{threading.get_ident()}")
        exact = self._saved_id if self._matches_saved else None
        data = {"snapshot": exact, "files": self._cache}
        temp.write_text(json.dumps(data, separators=(",", ":")))
        os.replace(temp, path)
        self._cache_dirty = False


def _is_digest(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)
