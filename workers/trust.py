"""Workspace trust: what gaffer runs or obeys from a workspace, and whether the user said so.

A workspace's `.mcp.json` servers, `.gaffer/tools` plugins, `.gaffer/profiles`,
`.gaffer/config.toml` and `.gaffer/skills` are code or orders. Each is read once,
through workspace confinement, into an `Item` holding its bytes and their digest; the
loaders use those bytes and never read the file again, so what runs is exactly what was
judged. An item is used only when the user approved that digest for this workspace
(`gaffer trust`, recorded in the user's own config folder) or trusted the whole
workspace for one run (`GAFFER_TRUST_WORKSPACE=1`, `--trust-workspace`). Anything else
is skipped with one line naming `gaffer trust`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from workers.tools.base import ToolError
from workers.tools.workspace import GAFFER_DIR, MCP_CONFIG, read_confined, resolve

Kind = Literal["config", "profile", "plugin", "skill", "mcp"]
State = Literal["trusted", "new", "changed"]
TRUST_ENV = "GAFFER_TRUST_WORKSPACE"
# Far past any real profile, plugin or config; a bigger one is refused, not truncated.
MAX_ITEM_BYTES = 1024 * 1024
# Files named on an MCP server's command line that are hashed with its entry.
MAX_REFERENCED_FILES = 8


@dataclass(frozen=True)
class Source:
    """Content gaffer obeys, read once: `origin` says where from, as shown to the user."""

    origin: str
    data: bytes
    path: Path | None = None
    """The file it was read from, where one exists (a skill's folder is beside it)."""


@dataclass(frozen=True)
class Item:
    kind: Kind
    key: str
    """Stable within the workspace: the relative path, or `.mcp.json: NAME`."""
    source: Source
    digest: str
    runs: str
    """What it would run or change, in a line: the command of an MCP server, a plugin's file."""
    state: State = "new"


@dataclass(frozen=True)
class Refused:
    """Workspace content that is never used, trusted or not (a link out, a hard link)."""

    key: str
    reason: str


@dataclass(frozen=True)
class WorkspaceTrust:
    workspace: Path
    items: tuple[Item, ...] = ()
    refused: tuple[Refused, ...] = ()
    trust_all: bool = False
    """The whole workspace is trusted for this run (GAFFER_TRUST_WORKSPACE=1)."""

    def allowed(self, item: Item) -> bool:
        return self.trust_all or item.state == "trusted"

    def sources(self, kind: Kind) -> list[Source]:
        """The content of this kind that may be used, in a stable order."""
        return [i.source for i in self.items if i.kind == kind and self.allowed(i)]

    def config(self) -> Source | None:
        """`.gaffer/config.toml`, when there is one and it may be used."""
        return next(iter(self.sources("config")), None)

    def skipped(self) -> list[Item]:
        return [i for i in self.items if not self.allowed(i)]

    def notices(self) -> list[str]:
        """One line per thing not used, each saying why and what to do."""
        lines = [self.notice(item) for item in self.skipped()]
        return lines + [f"skipped {r.key}: {r.reason}" for r in self.refused]

    @staticmethod
    def notice(item: Item) -> str:
        why = "changed since you trusted it" if item.state == "changed" else "not trusted"
        return (
            f"skipped {_KIND_NAMES[item.kind]} {item.key} ({why}; `gaffer trust` shows it and asks)"
        )


_KIND_NAMES: dict[Kind, str] = {
    "config": "config",
    "profile": "profile",
    "plugin": "plugin",
    "skill": "skill",
    "mcp": "MCP server",
}


def evaluate(
    workspace: Path, *, trust_all: bool = False, store: Path | None = None
) -> WorkspaceTrust:
    """Read what the workspace would have gaffer run or obey, and judge each item."""
    items, refused = scan(workspace)
    approved = TrustStore(store or default_store()).approved(workspace)
    judged = tuple(
        Item(**{**item.__dict__, "state": _state(approved.get(item.key), item.digest)})
        for item in items
    )
    return WorkspaceTrust(workspace, judged, tuple(refused), trust_all)


def trust_all_from_env() -> bool:
    return os.environ.get(TRUST_ENV, "").strip().lower() in ("1", "true", "yes")


def _state(approved_digest: str | None, digest: str) -> State:
    if approved_digest is None:
        return "new"
    return "trusted" if approved_digest == digest else "changed"


# -- reading the workspace --------------------------------------------------------------


def scan(workspace: Path) -> tuple[list[Item], list[Refused]]:
    items: list[Item] = []
    refused: list[Refused] = []

    def read(rel: str) -> bytes | None:
        try:
            data = read_confined(workspace, rel, MAX_ITEM_BYTES)
        except ToolError as error:
            refused.append(Refused(rel, str(error)))
            return None
        if data is not None and len(data) > MAX_ITEM_BYTES:
            refused.append(Refused(rel, f"over {MAX_ITEM_BYTES // 1024} KB; not read"))
            return None
        return data

    def add(kind: Kind, rel: str, runs: str) -> None:
        data = read(rel)
        if data is not None:
            source = Source(rel, data, Path(os.path.realpath(workspace), rel))
            items.append(Item(kind, rel, source, _digest(kind, rel, data), runs))

    if (data := read(f"{GAFFER_DIR}/config.toml")) is not None:
        rel = f"{GAFFER_DIR}/config.toml"
        source = Source(rel, data, Path(os.path.realpath(workspace), rel))
        items.append(Item("config", rel, source, _digest("config", rel, data), "settings"))
    for rel in _listed(workspace, f"{GAFFER_DIR}/profiles", "*.toml", refused):
        add("profile", rel, "an agent profile")
    for rel in _listed(workspace, f"{GAFFER_DIR}/tools", "*.py", refused):
        add("plugin", rel, f"Python code run in gaffer's own process ({rel})")
    for rel in _listed(workspace, f"{GAFFER_DIR}/skills", "*/SKILL.md", refused):
        add("skill", rel, "instructions every agent is offered")
    if (data := read(MCP_CONFIG)) is not None:
        items += _mcp_items(workspace, data, refused)
    return items, refused


def _listed(workspace: Path, folder: str, pattern: str, refused: list[Refused]) -> list[str]:
    """Workspace-relative paths in a folder of the workspace, never through a link out."""
    try:
        real = resolve(workspace, folder)
    except ToolError as error:
        refused.append(Refused(folder, str(error)))
        return []
    if not real.is_dir():
        return []
    root = os.path.realpath(workspace)
    return sorted(os.path.relpath(p, root) for p in real.glob(pattern))


def _mcp_items(workspace: Path, data: bytes, refused: list[Refused]) -> list[Item]:
    try:
        servers = json.loads(data.decode("utf-8")).get("mcpServers", {})
        if not isinstance(servers, dict):
            raise ValueError("mcpServers must be an object")
    except (ValueError, AttributeError) as error:
        refused.append(Refused(MCP_CONFIG, f"not a valid MCP config: {error}"))
        return []
    items = []
    for name, entry in sorted(servers.items()):
        key = f"{MCP_CONFIG}: {name}"
        single = json.dumps({"mcpServers": {name: entry}}, sort_keys=True).encode()
        extra = b"".join(_referenced_files(workspace, entry))
        runs = _mcp_runs(entry)
        # The server runs in the folder its files were hashed against, whatever folder
        # gaffer was started in (workers/extensions/mcp_servers.py).
        source = Source(key, single, Path(os.path.realpath(workspace)) / MCP_CONFIG)
        items.append(Item("mcp", key, source, _digest("mcp", key, single + extra), runs))
    return items


# Environment variables that change which program runs, or what it loads first.
_STEERING_ENV = re.compile(
    r"^(PATH|LD_\w+|DYLD_\w+|NODE_OPTIONS|NODE_PATH|PYTHON\w*|PERL5?LIB|RUBY\w*|BASH_ENV|ENV)$"
)


def _mcp_runs(entry: Any) -> str:
    if not isinstance(entry, dict):
        return "(not an object)"
    runs = f"connects to {entry['url']}" if entry.get("url") else _mcp_command(entry)
    if entry.get("readOnly") is True:
        # Its tools then go to every reader and the supervisor, and run in parallel.
        runs += "; says its tools only read (readOnly: every read-only agent gets them)"
    return runs


def _mcp_command(entry: dict[str, Any]) -> str:
    command = [str(entry.get("command", ""))] + [str(a) for a in entry.get("args", []) or []]
    runs = "runs " + shlex.join(command)
    env = entry.get("env") or {}
    if isinstance(env, dict) and env:
        shown = ", ".join(
            f"{k}={v}" + (" (CHANGES WHAT RUNS)" if _STEERING_ENV.match(str(k)) else "")
            for k, v in env.items()
        )
        runs += f" with environment {shown}"
    return runs


def _referenced_files(workspace: Path, entry: Any) -> list[bytes]:
    """Workspace files named on a server's command line: trusting the entry trusts them as
    they are now, and a change to them asks again."""
    if not isinstance(entry, dict) or not entry.get("command"):
        return []
    words = [str(entry["command"])] + [str(a) for a in entry.get("args", []) or []]
    env = entry.get("env")
    if isinstance(env, dict) and env.get("PATH") and "/" not in words[0]:
        # The server's PATH may name workspace folders: hash the program it would find.
        search = os.pathsep.join(
            os.path.join(os.path.realpath(workspace), p) for p in str(env["PATH"]).split(os.pathsep)
        )
        words.append(os.path.relpath(shutil.which(words[0], path=search) or words[0], workspace))
    found: list[bytes] = []
    for word in words:
        if len(found) >= MAX_REFERENCED_FILES or word.startswith("-"):
            continue
        with contextlib.suppress(ToolError, OSError):
            real = resolve(workspace, word)
            if real.is_file():
                data = read_confined(workspace, word, MAX_ITEM_BYTES)
                if data is not None:
                    found.append(word.encode() + b"\0" + data)
    return found


def _digest(kind: Kind, key: str, data: bytes) -> str:
    digest = hashlib.sha256()
    digest.update(f"{kind}\0{key}\0".encode())
    digest.update(data)
    return digest.hexdigest()


def read_folder(folder: Path, pattern: str) -> list[Source]:
    """The user's own extensions and profiles (`~/.config/gaffer/...`): trusted as written."""
    if not folder.is_dir():
        return []
    sources = []
    for path in sorted(folder.glob(pattern)):
        with contextlib.suppress(OSError):
            sources.append(Source(str(path), path.read_bytes(), path))
    return sources


# -- the user's approvals -----------------------------------------------------------------


def user_config_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "gaffer"


def default_store() -> Path:
    return user_config_dir() / "trusted.json"


@dataclass
class TrustStore:
    """Approved digests per workspace, in the user's config folder (never in a workspace)."""

    path: Path
    _data: dict[str, Any] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            loaded = {}
        self._data = loaded if isinstance(loaded, dict) else {}
        self._data.setdefault("version", 1)
        if not isinstance(self._data.get("workspaces"), dict):
            self._data["workspaces"] = {}

    def approved(self, workspace: Path) -> dict[str, str]:
        entry = self._data["workspaces"].get(os.path.realpath(workspace), {})
        items = entry.get("items", {}) if isinstance(entry, dict) else {}
        return {str(k): str(v) for k, v in items.items()} if isinstance(items, dict) else {}

    def approve(self, workspace: Path, items: Iterable[Item]) -> None:
        """Record exactly these items as trusted: what is not listed is no longer trusted."""
        self._data["workspaces"][os.path.realpath(workspace)] = {
            "approved_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "items": {item.key: item.digest for item in items},
        }
        self._save()

    def revoke(self, workspace: Path) -> bool:
        found = self._data["workspaces"].pop(os.path.realpath(workspace), None) is not None
        self._save()
        return found

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".trusted-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self._data, f, indent=2, sort_keys=True)
                f.write("\n")
            os.replace(temp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
