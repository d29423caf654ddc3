"""`make install` puts `gaffer` on the user's PATH: a link in ~/.local/bin (where pip,
pipx and uv put a user's commands) to the one in the clone's virtual environment, said
in one line. A `gaffer` already there that is not such a link is left alone, and said.

Run as `python -m supervisor.on_path VENV_GAFFER`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def put_on_path(target: Path, home: Path, path_variable: str) -> str:
    """Link ~/.local/bin/gaffer to `target`; the line that says what was done."""
    bin_dir = home / ".local" / "bin"
    link = bin_dir / "gaffer"
    if link.is_symlink() and Path(os.readlink(link)) == target:
        said = f"gaffer: {link} already points to {target}"
    elif link.exists() or link.is_symlink():
        return (
            f"gaffer: {link} is there already and is not this clone's: left as it is; "
            f"run {target} instead, or link it yourself"
        )
    else:
        bin_dir.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
        said = f"gaffer: linked {link} → {target}"
    on_path = any(
        Path(part).expanduser().resolve() == bin_dir.resolve()
        for part in path_variable.split(os.pathsep)
        if part
    )
    if not on_path:
        said += f'; {bin_dir} is not on your PATH: add it (export PATH="{bin_dir}:$PATH")'
    return said


def main(args: list[str]) -> int:
    if len(args) != 1:
        print("usage: python -m supervisor.on_path VENV_GAFFER", file=sys.stderr)
        return 64
    print(put_on_path(Path(args[0]).absolute(), Path.home(), os.environ.get("PATH", "")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
