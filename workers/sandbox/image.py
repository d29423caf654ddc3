"""The sandbox image's identity: a digest of the code it runs, so an image built from
other code than this gaffer's is found stale before a container starts."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from workers import python_source


def image_hash() -> str:
    """A digest of what the image runs: the tool server, every module of gaffer's it
    imports (followed through the source, not listed by hand), and the Dockerfile. An
    image built from anything else is stale."""
    workers = Path(__file__).resolve().parent.parent
    files = sorted(_imported_by("workers.sandbox.tool_server", workers))
    dockerfile = workers.parent / "sandbox_image" / "Dockerfile"
    digest = hashlib.sha256()
    for path in [*files, *([dockerfile] if dockerfile.is_file() else [])]:
        name = path.relative_to(workers.parent).as_posix()
        digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _imported_by(module: str, workers: Path) -> set[Path]:
    """The files `import module` runs among workers/: its packages' __init__ files, the
    module, and what they import, directly or through others (every import, those inside
    functions too)."""
    seen: set[Path] = set()
    todo = [module]
    while todo:
        parts = todo.pop().split(".")
        if parts[0] != "workers":
            continue
        for depth in range(1, len(parts) + 1):
            folder = workers.joinpath(*parts[1:depth])
            for path in (folder / "__init__.py", folder.with_suffix(".py")):
                if path in seen or not path.is_file():
                    continue
                seen.add(path)
                for node in ast.walk(python_source.parse(path.read_bytes())):
                    if isinstance(node, ast.Import):
                        todo += [alias.name for alias in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                        todo += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return seen
