"""Where, in a workspace, git finds what it runs on its own: repositories (any `.git`, and
any folder git would take for one), git's hooks folders, and config files git includes.

git is asked itself where it can be (with config forced safe: no fsmonitor, explicit
bare repositories only), since hooksPath and includes live in several config files and
are relative to the repository's top, which may lie above the workspace. Without git,
the repository's own config is read directly.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

from workers import host_programs

# What makes a folder a repository to git, whatever its name: HEAD, with objects and refs
# of its own or, through `commondir`, of another folder (git's own is_git_directory).
GIT_DIR_MARKERS = frozenset({"HEAD", "objects", "refs", "commondir"})
# Config forced on every git gaffer runs, or runs for an agent on the host: git must
# never run a workspace's fsmonitor, nor treat a planted folder as a bare repository.
FORCED_GIT_CONFIG = {
    "core.fsmonitor": "false",
    "safe.bareRepository": "explicit",
    # A plain `git log` would verify signatures with the program the config names.
    "log.showSignature": "false",
    "gpg.program": "false",
    "gpg.ssh.program": "false",
    "gpg.x509.program": "false",
}
GIT_TIMEOUT_S = 10
# A HEAD git reads is one line: a ref or an object id.
MAX_HEAD_BYTES = 4096


def git_env(base: dict[str, str], extra: dict[str, str] | None = None) -> dict[str, str]:
    """`base` with FORCED_GIT_CONFIG (and `extra`) added at git's command-line level,
    which outranks every config file."""
    env = dict(base)
    count = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
    for key, value in {**FORCED_GIT_CONFIG, **(extra or {})}.items():
        env[f"GIT_CONFIG_KEY_{count}"] = key
        env[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    env["GIT_CONFIG_COUNT"] = str(count)
    return env


def workspace_for(folder: Path) -> Path:
    """The workspace gaffer works in when started in `folder`: the top of the git
    repository around it, as other coding agents take it (so a run from a subfolder
    sees the whole project and `gaffer logs` finds its runs), or the folder itself.
    Never the home folder or `/`: a dotfiles repository is not the project. From then on
    no program gaffer starts on the host is taken from inside it (host_programs)."""
    found = _workspace_around(Path(os.path.realpath(folder)))
    host_programs.keep_out(found)
    return found


def _workspace_around(here: Path) -> Path:
    # git's own guard stays on here: a repository someone else owns around this folder
    # (a /tmp/.git planted by another user) is not taken as the project.
    top = _git(str(here), "rev-parse", "--show-toplevel", trust_owner=False)
    if not top or not top.strip():
        return here
    root = Path(os.path.realpath(top.strip()))
    if root in (Path.home().resolve(), Path("/")) or not _inside(str(here), str(root)):
        return here
    try:
        if os.stat(root).st_uid != os.geteuid():
            return here
    except OSError:
        return here
    return root


def is_git_dir_name(name: str) -> bool:
    return name.lower() == ".git"


def looks_like_git_dir(names: set[str]) -> bool:
    """A folder holding these names may be a repository to git, even one not named .git:
    HEAD with objects and refs, or HEAD with a commondir that lends them (a superset of
    git's own test, which also reads what they hold)."""
    return "HEAD" in names and ({"objects", "refs"} <= names or "commondir" in names)


def git_takes_for_repository(folder: Path) -> bool:
    """Whether git itself takes `folder` for a repository's git directory (asked with the
    forced config, bare repositories allowed so the question is answered, and a ceiling
    at its parent); for a folder that holds a HEAD but not what `looks_like_git_dir`
    names, in case git accepts more than that."""
    try:  # a FIFO named HEAD would hold git (and the sweep) until its timeout
        head = os.lstat(os.path.join(folder, "HEAD"))
    except OSError:
        return False
    if not stat.S_ISREG(head.st_mode) or head.st_size > MAX_HEAD_BYTES:
        return False
    done = run_git(
        folder,
        *("-c", "safe.bareRepository=all", "rev-parse", "--absolute-git-dir"),
        only_here=True,
    )
    if done is None or done.returncode != 0:
        return False
    return os.path.realpath(os.fsdecode(done.stdout).strip()) == os.path.realpath(folder)


def controlled(workspace: Path) -> list[str]:
    """Workspace-relative real paths of git's hooks folders and of config files git reads
    that lie inside the workspace (outside any .git, which is protected whole)."""
    root = os.path.realpath(workspace)
    found = _from_git(root) if shutil.which("git") else None
    hooks, configs = found if found is not None else (_hooks_without_git(root), [])
    paths = []
    for full in [*hooks, *configs]:
        real = os.path.realpath(full)
        if real != root and _inside(real, root):
            paths.append(os.path.relpath(real, root))
    return list(dict.fromkeys(paths))


def _from_git(root: str) -> tuple[list[str], list[str]] | None:
    top = _git(root, "rev-parse", "--show-toplevel")
    listing = _git(root, "config", "--show-origin", "--list")
    if listing is None:
        return None
    hooks_values = _git(root, "config", "--get-all", "core.hooksPath") or ""
    base = top.strip() if top and top.strip() else root
    hooks = [_hooks_folder(base, value) for value in hooks_values.splitlines() if value.strip()]
    configs = []
    for line in listing.splitlines():
        origin, _, entry = line.partition("\t")
        if not origin.startswith("file:"):
            continue
        config = os.path.join(base, origin.removeprefix("file:"))  # relative to the top
        configs.append(config)
        key, _, value = entry.partition("=")
        if _INCLUDE.match(key) and value.strip():
            # Every file an include names, there or not yet: one a worker could create
            # would be read as config by the user's next git. Relative to the folder of
            # the file that names it (git-config(1), "Includes").
            path = os.path.expanduser(value.strip())
            configs.append(os.path.join(os.path.dirname(config), path))
    return hooks, configs


# `include.path` and `includeIf.<condition>.path`, as `git config --list` names them.
_INCLUDE = re.compile(r"^include(if\..*)?\.path$", re.IGNORECASE)


def run_git(
    root: str | Path,
    *args: str,
    trust_owner: bool = True,
    timeout: float = GIT_TIMEOUT_S,
    only_here: bool = False,
    input: bytes | None = None,
) -> subprocess.CompletedProcess[bytes] | None:
    """git as gaffer runs it on the host: FORCED_GIT_CONFIG, no prompts, no locks; None
    when git is missing or does not end in time. `trust_owner`: read a repository owned by
    another user too (root serving a user's checkout), whose config must still be seen to
    protect what it names; off, git's own ownership guard stands. `only_here`: a
    repository in `root` itself or none, never one in a folder above it."""
    if not shutil.which("git"):
        return None
    # No GIT_* of gaffer's own (GIT_DIR, GIT_CONFIG_*) reaches it: only FORCED_GIT_CONFIG.
    env = git_env(host_programs.environment(), {"safe.directory": "*"} if trust_owner else None)
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0")
    if only_here:
        env["GIT_CEILING_DIRECTORIES"] = os.path.dirname(os.path.realpath(root))
    try:
        return host_programs.run(
            ["git", "-C", os.fspath(root), *args], env=env, timeout=timeout, input=input
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def _git(root: str, *args: str, trust_owner: bool = True) -> str | None:
    """git's output as text; '' when it failed, None when it could not run."""
    done = run_git(root, *args, trust_owner=trust_owner)
    if done is None:
        return None
    return os.fsdecode(done.stdout) if done.returncode == 0 else ""


def _hooks_folder(base: str, value: str) -> str:
    """Where hooks are run from; husky 9 sets `.husky/_`, whose scripts run the files one
    level up, so a folder named `_` stands for its parent."""
    target = os.path.normpath(os.path.join(base, os.path.expanduser(value.strip())))
    return os.path.dirname(target) if os.path.basename(target) == "_" else target


# -- without git: the repository's own config, read directly --------------------------------

_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"[^"]*")?\s*\]')
_HOOKS_PATH = re.compile(r"^\s*hookspath\s*=\s*(.*?)\s*$", re.IGNORECASE)


def _hooks_without_git(root: str) -> list[str]:
    configs = [_repo_config(Path(root))]
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    configs += [Path.home() / ".gitconfig", Path(xdg) / "git" / "config"]
    hooks = []
    for config in configs:
        if config is None:
            continue
        with contextlib.suppress(OSError, UnicodeDecodeError):
            value = _core_hooks_path(config.read_text(encoding="utf-8"))
            if value:
                hooks.append(_hooks_folder(root, value))
    return hooks


def _repo_config(root: Path) -> Path | None:
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git / "config"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        pointer = dot_git.read_text(encoding="utf-8").strip()  # worktrees: "gitdir: PATH"
        if pointer.startswith("gitdir:"):
            gitdir = Path(root, pointer.removeprefix("gitdir:").strip())
            common = gitdir / "commondir"
            if common.is_file():
                gitdir = gitdir / common.read_text(encoding="utf-8").strip()
            return gitdir / "config"
    return None


def _core_hooks_path(text: str) -> str | None:
    section, value = "", None
    for line in text.splitlines():
        if match := _SECTION.match(line):
            section = match.group(1).lower()
        elif section == "core" and (match := _HOOKS_PATH.match(line)):
            value = match.group(1).split(" #")[0].split(" ;")[0].strip().strip('"')
    return value


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
