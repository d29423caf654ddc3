"""What an answer or a task names of the code: paths (`src/app.py`, `loop.py:42`), code
names, the workspace's own top-level names; and which of the paths named are not in the
workspace (what a model made up). The verification gate reads these (verification.py)."""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from pathlib import Path

# A path as answers name them: `src/app.py`, `workers/loop.py:42`, `sandbox_image/`.
_NAMED_PATH = re.compile(
    r"(?<![\w/.:-])((?:[\w.-]+/)+(?:[\w.-]+\.(?:py|md|toml|json|ya?ml|txt|sh|js|ts|tsx|go|rs|c|h|cpp|java|rb|cfg|ini|jinja))?|[\w-]+\.(?:py|md|toml|json|ya?ml|txt|sh|js|ts|go|rs|cfg|ini))(?::\d+)?(?![\w/])"
)


# A bare file name ("loop.py") counts when a file of that name is anywhere in the
# workspace; looking is capped so a huge tree costs little.
MAX_NAMES_SEEN = 50_000
_SKIPPED_WHEN_LOOKING = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__"})


# A path with no suffix nor closing slash, written as code (`supervisor/delegation`): one
# only where its first part is one of the workspace's folders. Not in prose: "a
# client/server design" names no path where there is a `client` folder.
_BARE_PATH = re.compile(r"`([\w-]+(?:/[\w-]+)+)`")


def named_paths(
    text: str, container_root: str | None = None, folders: Collection[str] = ()
) -> list[str]:
    """The paths a text names, workspace-relative, in order, each once: `src/app.py`,
    `workers/loop.py:42` (as `workers/loop.py`), `/workspace/calc.py` (as `calc.py`);
    and `supervisor/delegation`, in backquotes, where `supervisor` is one of `folders`."""
    spans = path_spans(text, container_root, folders)
    return list(dict.fromkeys(path for _, path in spans))


def path_spans(
    text: str, container_root: str | None = None, folders: Collection[str] = ()
) -> list[tuple[int, str]]:
    """Where in `text` each path it names ends, and the path, in order (the container's
    root taken off, which keeps every other character where it was)."""
    if container_root:
        root = re.escape(container_root.rstrip("/"))
        text = re.sub(rf"(?<![\w/.-]){root}/", lambda m: " " * len(m.group()), text)
    found = [(match.end(), match.group(1)) for match in _NAMED_PATH.finditer(text)]
    if folders:
        found += [
            (match.end(1), match.group(1))
            for match in _BARE_PATH.finditer(text)
            if match.group(1).split("/", 1)[0] in folders
        ]
        found.sort()
    return [
        (end, path)
        for end, path in found
        if "://" not in text[max(0, end - len(path) - 8) : end - len(path) + 3]  # not in a URL
    ]


def written_as_code(word: str) -> bool:
    """A word written as code, not prose: an underscore inside (`get_logger`), a capital
    after its first letter (`BoundLogger`), or a dot between names of two letters or more
    (`os.path`, never "e.g"). Not a digit: "IPv6", "utf8" and "sha256" are prose too."""
    return (
        "_" in word.strip("_")
        or any(c.isupper() for c in word[1:])
        or bool(re.fullmatch(r"\w{2,}(?:\.\w{2,})+", word))
    )


_CODE_NAME = re.compile(r"`[^`\n]{2,}`|\b[A-Za-z_]\w*\(\)|\b\w+/")


def names_code(answer: str, workspace: Path | None) -> bool:
    """Whether an answer speaks of the code: a path, a `name` or call(), a folder/, or a
    top-level name of the workspace. Only such an answer needs a look behind it; a
    greeting or a question about no code is answered as it is."""
    if named_paths(answer) or _CODE_NAME.search(answer):
        return True
    if workspace is None:
        return False
    try:
        top = {
            entry.name.lower() for entry in os.scandir(workspace) if not entry.name.startswith(".")
        }
    except OSError:
        return False
    return any(word in top for word in re.findall(r"[\w.-]+", answer.lower()))


# Words of a task about the code in front of the agent, when it names none of it.
_CODE_WORDS = frozenset(
    [
        "repo",
        "repository",
        "codebase",
        "project",
        "code",
        "source",
        "file",
        "files",
        "folder",
        "folders",
        "directory",
        "function",
        "functions",
        "class",
        "classes",
        "method",
        "methods",
        "module",
        "modules",
        "package",
        "test",
        "tests",
        "bug",
        "bugs",
        "fix",
        "error",
        "errors",
        "crash",
        "fails",
        "failing",
        "refactor",
        "rename",
        "implement",
        "add",
        "change",
        "build",
        "survey",
        "explain",
        "where",
        "api",
        "cli",
        "config",
        "docs",
        "readme",
        "script",
    ]
)


def about_the_code(task: str, workspace: Path | None) -> bool:
    """Whether a task is about the code: it names some, or speaks of code, files,
    tests, a change. `hello there` or `what is 2+2?` is not: it needs no look."""
    words = set(re.findall(r"[a-z]+", task.lower()))
    return bool(words & _CODE_WORDS) or names_code(task, workspace)


def missing_paths(answer: str, workspace: Path, container_root: str | None = None) -> list[str]:
    """Paths an answer names that are not in the workspace: what a model made up."""
    missing: list[str] = []
    inside: set[str] | None = None
    for path in named_paths(answer, container_root):
        if os.path.lexists(os.path.join(workspace, path)):
            continue
        # A name, or a path from inside a folder ("workers/: cluster/driver.py, …"),
        # counts when some file or folder in the workspace ends with it.
        inside = _paths_in(workspace) if inside is None else inside
        if path.rstrip("/") in inside:
            continue
        missing.append(path)
    return missing


def _paths_in(workspace: Path) -> set[str]:
    """Every tail of every workspace path: `a/b/c.py` gives `c.py`, `b/c.py`, `a/b/c.py`."""
    tails: set[str] = set()
    for folder, dirs, files in os.walk(workspace):
        dirs[:] = [d for d in dirs if d not in _SKIPPED_WHEN_LOOKING]
        parts = Path(folder).relative_to(workspace).parts
        for name in [*dirs, *files]:
            whole = [*parts, name]
            tails.update("/".join(whole[i:]) for i in range(len(whole)))
        if len(tails) > MAX_NAMES_SEEN:
            break
    return tails
