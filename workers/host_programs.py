"""The one place gaffer starts a program on the host, outside any container: the local
model server, pip, git, ripgrep, the grep fallback, the host shell tool, its probes.

A workspace is untrusted data, so nothing started here may read code or settings from
it unless that program must work there (a search, the user's approved shell command):

- it runs from a folder outside the workspace (gaffer's state folder) unless its caller
  names one, and git is given its repository with `-C` (git_paths.run_git);
- its program is found on a PATH with only absolute folders, none inside the folder it
  runs in, so a `node_modules/.bin/git` or a `.` on PATH is never what runs;
- Python runs isolated (`-I`: no script or working folder on `sys.path`, no PYTHON*
  variables, no user site), so a workspace's `typing.py`, `pip/` or `sitecustomize.py`
  is never imported; gaffer's own modules run through `gaffer_module`;
- its environment is only what the program needs: a short list of plain variables,
  plus what the caller names. Secrets (the API key) go to nobody unless named.

tests/test_structure.py fails on a `subprocess` or `os.exec*` anywhere else.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

# What every program may see: where to find programs, who and where the user is, how text
# is encoded. No PYTHON*, GIT_*, LD_*, RIPGREP_CONFIG_PATH or secrets.
PLAIN_VARIABLES = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TZ",
    "TMPDIR",
)
# A program that is not given a folder of its own runs from here: outside every workspace
# (gaffer never takes `/` for one), and nothing gaffer or a repository can write.
FALLBACK_FOLDER = "/"

Output = int | IO[bytes] | None


def environment(
    *names: str, values: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The plain variables and the `names` the caller says this program needs, from `base`
    (gaffer's own environment), then `values` on top; PATH keeps only absolute folders."""
    source = os.environ if base is None else base
    env = {k: source[k] for k in (*PLAIN_VARIABLES, *names) if k in source}
    env["PATH"] = safe_path(env.get("PATH", os.defpath))
    # A Python the program starts itself (`python -m server` in a folder it was given)
    # never puts that folder on its path either.
    env["PYTHONSAFEPATH"] = "1"
    env.update(values or {})
    return env


_kept_out: set[str] = set()
"""Workspaces this process works in (keep_out): no program is taken from a folder inside
one, whatever PATH says (direnv and npm put `node_modules/.bin` there by absolute path)."""


def keep_out(workspace: str | Path) -> None:
    """From now on, never run a program found inside `workspace`."""
    _kept_out.add(os.path.realpath(workspace))


def safe_path(path: str, *, outside: str | Path | None = None) -> str:
    """PATH with only absolute folders, and none inside `outside` (where the program
    runs), the working folder, or a workspace kept out."""
    unsafe = [*_kept_out, *_working_folder(), *([outside] if outside is not None else [])]
    kept = []
    for entry in path.split(os.pathsep):
        if not os.path.isabs(entry) or any(_inside(entry, folder) for folder in unsafe):
            continue
        if entry not in kept:
            kept.append(entry)
    return os.pathsep.join(kept) or os.defpath


def _working_folder() -> list[str]:
    try:
        return [os.getcwd()]
    except OSError:  # removed under gaffer: nothing there to keep out
        return []


def _inside(entry: str, folder: str | Path) -> bool:
    top = os.path.realpath(folder)
    real = os.path.realpath(entry)
    return real == top or real.startswith(top.rstrip("/") + "/")


def python(*args: str) -> list[str]:
    """This interpreter, isolated, with `args`."""
    return [sys.executable, "-I", *args]


# Runs one of gaffer's own modules as `python -m` would, from an isolated interpreter: the
# installed gaffer when there is one; else the checkout this file is in, appended after the
# standard library and site-packages so it shadows none of them.
_BOOT = (
    "import importlib.util, runpy, sys\n"
    "checkout, module = sys.argv.pop(1), sys.argv.pop(1)\n"
    "if importlib.util.find_spec('workers') is None: sys.path.append(checkout)\n"
    "runpy.run_module(module, run_name='__main__', alter_sys=True)\n"
)


def gaffer_module(module: str, *args: str) -> list[str]:
    """The command that runs gaffer's own `module` with `args`, isolated."""
    return python("-c", _BOOT, str(Path(__file__).resolve().parents[1]), module, *args)


def resolved(argv: Sequence[str], env: Mapping[str, str], cwd: str) -> list[str]:
    """argv with its program found on the environment's PATH, never inside `cwd` (the
    folder it will run in); a path (`./serve.sh`) stays as it is. FileNotFoundError when
    there is none. For a program another library starts (an MCP server)."""
    program = argv[0]
    if os.sep not in program:
        found = shutil.which(program, path=safe_path(env.get("PATH", ""), outside=cwd))
        if found is None:
            raise FileNotFoundError(f"{program} is not installed (not on PATH)")
        program = found
    return [program, *argv[1:]]


def _launch(
    argv: Sequence[str], cwd: str | Path | None, env: Mapping[str, str] | None
) -> dict[str, Any]:
    """What every start shares: the program found, the folder, the environment."""
    where = os.fspath(cwd) if cwd is not None else FALLBACK_FOLDER
    chosen = environment() if env is None else dict(env)
    return {"args": resolved(argv, chosen, where), "cwd": where, "env": chosen}


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    input: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run a program to its end and capture its output; OSError when it cannot start,
    subprocess.TimeoutExpired past `timeout` (it is killed)."""
    return subprocess.run(
        **_launch(argv, cwd, env),
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        check=False,
    )


def start(
    argv: Sequence[str],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    stdout: Output = subprocess.PIPE,
    stderr: Output = subprocess.PIPE,
    new_session: bool = False,
) -> subprocess.Popen[bytes]:
    """Start a program that runs beside gaffer; the caller waits for it and ends it."""
    return subprocess.Popen(
        **_launch(argv, cwd, env),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=new_session,
    )


# What a browser needs to find the user's screen and session.
BROWSER_VARIABLES = ("DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")


def open_page(uri: str) -> bool:
    """Show a page in the user's browser (`$BROWSER`, else xdg-open or open); False when
    there is none to ask."""
    env = environment(*BROWSER_VARIABLES)
    for opener in (*os.environ.get("BROWSER", "").split(os.pathsep), "xdg-open", "open"):
        if not opener:
            continue
        try:
            start(
                [opener, uri],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                new_session=True,
            )
        except OSError:
            continue
        return True
    return False
