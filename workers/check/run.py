"""gaffer runs the check itself, where the agent cannot steer it: in a fresh container of
the sandbox image, network off, over a copy of the final workspace in which the files the
task keeps are put back as they were at the start and every file that steers a test run
the agent made is gone. Its command, environment and caches are gaffer's: Python reads
no `__pycache__` of the tree (PYTHONPYCACHEPREFIX), no user site, and puts the working
folder last on its path, not first (PYTHONSAFEPATH, and gaffer's own sitecustomize from a
read-only mount appends it): the project's modules import as under `python -m pytest`,
but a `pytest.py` or `xml/` in the workspace is not the one that runs. pytest loads no
plugin by entry point (a `*.dist-info` in the workspace is not one).
Only plain files, folders and links are copied: a pipe would hang the copy.

The verdict is that run's report: pytest's JUnit XML, written to a folder gaffer names
outside the copy, else the runner's summary line. A run passes only with more than 0
tests passed and none failed; one that exits 0 with no report (code under test that
calls `os._exit(0)` as pytest imports it) has failed. What no harness can stop is code
under test lying to the runner in its own process: that is why the check runs after the
agent ends, in a container the agent never had.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import shutil
import socket
import stat
import time
from pathlib import Path
from typing import Any

from workers import state
from workers.check.choose import Check
from workers.check.report import CheckRun, Verdict, judged, read_plain
from workers.guards.test_runs import invocation, status_command
from workers.processes import owner_gone, owner_token
from workers.sandbox.container import ENVIRONMENT, WORKSPACE, confined
from workers.sandbox.leftovers import CHECK_LABEL, OWNER_LABEL
from workers.sandbox.options import DockerOptions

REPORT = "/gaffer-report"
HOOK = "/gaffer-hook"
CHECK_ENVIRONMENT = {
    **ENVIRONMENT,
    "PYTHONPYCACHEPREFIX": "/tmp/pycache",
    "PYTHONSAFEPATH": "1",
    "PYTHONPATH": HOOK,
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
}
# Run by Python at start-up from HOOK: the working folder, after everything else.
APPEND_WORKING_FOLDER = "import os, sys\n\nsys.path.append(os.getcwd())\n"
# What of the check's output is kept for the verdict's first failure and the log.
MAX_OUTPUT_CHARS = 20_000
# A workspace past this is not copied for a check: unchecked when it was so at the start,
# failed when the run made it so (an agent could otherwise dodge the check with one file).
MAX_COPY_BYTES = 2 * 1024**3
CHECKS = "checks"
# Folders never copied: git's own (no test reads it) and the state of another checker.
NOT_COPIED = frozenset({".git"})


def run_check(
    check: Check,
    workspace: Path,
    *,
    restored: dict[str, bytes | None],
    options: DockerOptions,
    seconds: float,
    docker_client: Any,
    uid: int | None = None,
    large_at_start: bool = False,
) -> CheckRun:
    """Run `check` over a copy of `workspace` in which each path of `restored` holds the
    bytes it had at the start (None: it was not there, and is removed). A copy that
    cannot be made fails the check, unless the workspace was too large at the start."""
    changed = tuple(p for p, data in restored.items() if not _holds(workspace / p, data))
    if (missing := _not_in_image(docker_client, options, check.command)) is not None:
        return CheckRun("unchecked", check.command, check.source, detail=missing)
    done = _run_over_copy(check, workspace, restored, options, seconds, docker_client, uid)
    if done.verdict == "unchecked" and done.detail.startswith(NOT_COPIED_SAYS):
        blamed = not (large_at_start and "too large" in done.detail)
        done = dataclasses.replace(done, verdict="failed") if blamed else done
    return dataclasses.replace(done, put_back=changed)


NOT_COPIED_SAYS = "the workspace could not be copied for the check"


def _holds(path: Path, data: bytes | None) -> bool:
    """Whether `path` is as `data` says: a plain file with those bytes, or not there."""
    if data is None:
        return not os.path.lexists(path)
    return read_plain(path, len(data)) == data


# Whether the image has a runner, by image and program: asked once per process.
_IN_IMAGE: dict[tuple[str, str], bool] = {}


def _not_in_image(docker_client: Any, options: DockerOptions, command: str) -> str | None:
    """Why the image cannot run the check (its runner is not there: no npm, no go), asked of
    the image in a container of its own before the workspace is anywhere near it; None when
    it can, or the command's program cannot be told."""
    import docker.errors

    words = status_command(command) or []
    program = words[0] if words else ""
    if not program or "/" in program:  # a path: the copy's own, or not there to ask about
        return None
    key = (options.image, program)
    if key not in _IN_IMAGE:
        try:
            docker_client.containers.run(
                options.image,
                command=["bash", "-c", 'command -v -- "$0" >/dev/null', program],
                network_mode="none",
                remove=True,
                **confined(options.memory, options.cpus, options.pids),
            )
            _IN_IMAGE[key] = True
        except docker.errors.ContainerError:
            _IN_IMAGE[key] = False
        except docker.errors.DockerException:
            return None  # the check's own run will say what Docker said
    return None if _IN_IMAGE[key] else f"the sandbox image has no `{program}` to run the check"


def _run_over_copy(
    check: Check,
    workspace: Path,
    restored: dict[str, bytes | None],
    options: DockerOptions,
    seconds: float,
    docker_client: Any,
    uid: int | None,
) -> CheckRun:
    # Named by its owner, so a later gaffer can prove a killed run's copy abandoned.
    folder = state.workspace_dir(workspace, CHECKS, f"{owner_token()}-{secrets.token_hex(4)}")
    try:
        copy, report = folder / "workspace", folder / "report"
        try:
            if (too_large := _copy(workspace, copy)) is None:
                _restore(copy, restored)
        except (OSError, shutil.Error) as error:
            too_large = f"{NOT_COPIED_SAYS}: {_first_error(error)}"
        if too_large is not None:
            return CheckRun("unchecked", check.command, check.source, detail=too_large)
        owner = os.stat(workspace)
        user = (owner.st_uid, owner.st_gid) if uid is None else (uid, uid)
        report.mkdir(mode=0o700)
        (folder / "hook").mkdir(mode=0o755)
        (folder / "hook" / "sitecustomize.py").write_text(APPEND_WORKING_FOLDER)
        state.chown_tree(folder, *user)
        command, junit = _with_report(check.command)
        started = time.monotonic()
        exit_code, output = _run(docker_client, options, copy, report, command, user, seconds)
        took = time.monotonic() - started
        found = CheckRun("unchecked", check.command, check.source, exit_code, seconds=took)
        if exit_code is None:
            return _with(found, "timed_out", detail=f"no end within {seconds:.0f}s")
        return judged(found, output, report / "junit.xml" if junit else None)
    finally:
        _remove(folder)


def reap_checks(workspace: Path) -> list[str]:
    """Remove the copies of checks whose run was killed (their owner is proven gone)."""
    try:
        folder = state.workspace_dir(workspace, CHECKS)
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    removed = []
    for name in names:
        if owner_gone(name.rpartition("-")[0]):
            _remove(folder / name)
            removed.append(name)
    return removed


def _remove(folder: Path) -> None:
    """A check's folder gone, even where the code under test took its own permissions
    away (a `chmod 000` folder in the copy); links are removed, never followed."""

    def opened_up(_function: object, path: str, _error: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)  # a folder is never a link here
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
                shutil.rmtree(path, onerror=opened_up)
            else:
                os.unlink(path)

    shutil.rmtree(folder, onerror=opened_up)


def _copy(workspace: Path, copy: Path) -> str | None:
    """The workspace copied, links as links, pipes and devices left out; why not, when it
    is too large. Each folder is opened by handle and each name under it without
    following a link: a file swapped for a link while the copy runs is never read
    through it (a host file would otherwise land in the copy, and in what the agent is
    told of a failure)."""
    total = 0
    for folder, dirs, files in os.walk(workspace):
        dirs[:] = [d for d in dirs if d not in NOT_COPIED]
        total += sum(_size(os.path.join(folder, name)) for name in files)
        if total > MAX_COPY_BYTES:
            size = MAX_COPY_BYTES // 1024**3
            return f"{NOT_COPIED_SAYS}: the workspace is over {size} GB, too large to copy"
    folders = [(os.open(os.path.realpath(workspace), FOLDER_FLAGS), copy)]
    try:
        while folders:
            fd, target = folders[-1]
            target.mkdir(mode=0o700)
            names = [entry.name for entry in os.scandir(fd)]
            folders.pop()
            try:
                for name in names:
                    folders += _copy_entry(fd, name, target)
            finally:
                os.close(fd)
    finally:
        for fd, _ in folders:  # what a failure left opened
            os.close(fd)
    return None


FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _copy_entry(folder: int, name: str, target: Path) -> list[tuple[int, Path]]:
    """One name of an opened folder copied into `target`: a file's bytes and permission
    bits, a link as a link; a folder is opened and given back to be copied in turn. git's
    own folder, pipes, sockets and devices are left out."""
    info = os.lstat(name, dir_fd=folder)
    if stat.S_ISDIR(info.st_mode):
        if name in NOT_COPIED:
            return []
        return [(os.open(name, FOLDER_FLAGS, dir_fd=folder), target / name)]
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(name, dir_fd=folder), target / name)
    elif stat.S_ISREG(info.st_mode):
        with os.fdopen(os.open(name, FILE_FLAGS, dir_fd=folder), "rb") as source:
            if not stat.S_ISREG(os.fstat(source.fileno()).st_mode):
                return []  # swapped for a pipe since it was listed
            with open(target / name, "xb") as copied:
                shutil.copyfileobj(source, copied)
        os.chmod(target / name, stat.S_IMODE(info.st_mode) & 0o777)
    return []


def _first_error(error: BaseException) -> str:
    """One line of what stopped the copy (shutil.Error holds one per file)."""
    if isinstance(error, shutil.Error) and error.args and isinstance(error.args[0], list):
        first = error.args[0][0] if error.args[0] else ("", "", str(error))
        return f"{first[0]}: {first[-1]}" if len(first) == 3 else str(first)
    return str(error)


def _size(path: str) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _restore(copy: Path, restored: dict[str, bytes | None]) -> None:
    """Each kept path as it was at the start, never through a link in the copy: a folder
    on its way that is now a link or a file is made a folder again (in the copy alone;
    where nothing is to be put, a link on the way leads out of the copy and is left)."""
    for rel, data in restored.items():
        parts = Path(rel).parts
        folders = [copy.joinpath(*parts[:depth]) for depth in range(1, len(parts))]
        in_the_way = [f for f in folders if f.is_symlink() or (f.exists() and not f.is_dir())]
        if in_the_way and data is None:
            continue
        for folder in folders:
            if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
                folder.unlink()
            folder.mkdir(exist_ok=True)
        target = copy / rel
        if os.path.lexists(target):
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
        if data is not None:
            target.write_bytes(data)


def _with_report(command: str) -> tuple[str, bool]:
    """The command with pytest told to write its JUnit report where gaffer reads it, when
    pytest is what decides its exit status."""
    words = status_command(command)
    found = invocation(words, frozenset()) if words else None
    if found is None or found.runner != "pytest":
        return command, False
    extra = f" --junitxml={REPORT}/junit.xml -p no:cacheprovider"
    return command + extra, True


def _run(
    docker_client: Any,
    options: DockerOptions,
    copy: Path,
    report: Path,
    command: str,
    user: tuple[int, int],
    seconds: float,
) -> tuple[int | None, str]:
    """The check's exit code (None past `seconds`) and its output's end."""
    from docker.types import LogConfig, Mount

    container = docker_client.containers.run(
        options.image,
        # One stream, in the order written: the last lines shown are the ones printed last
        # (Docker's log interleaves two streams by the time each line reached it).
        command=["bash", "-c", "exec 2>&1\n" + command],
        detach=True,
        user=f"{user[0]}:{user[1]}",
        working_dir=WORKSPACE,
        environment=CHECK_ENVIRONMENT,
        # Its output is read back (the tail), never more than a few megabytes kept.
        log_config=LogConfig(type="json-file", config={"max-size": "4m", "max-file": "1"}),
        network_mode="none",
        **confined(options.memory, options.cpus, options.pids),
        mounts=[
            Mount(target=WORKSPACE, source=str(copy), type="bind"),
            Mount(target=REPORT, source=str(report), type="bind"),
            Mount(target=HOOK, source=str(report.parent / "hook"), type="bind", read_only=True),
        ],
        labels={
            CHECK_LABEL: "1",
            OWNER_LABEL: owner_token(),
            "gaffer.host": socket.gethostname(),
        },
    )
    started = time.monotonic()
    try:
        try:
            code: int | None = int(container.wait(timeout=seconds)["StatusCode"])
        except Exception:  # the SDK raises requests' timeout: the check did not end
            container.kill()
            if time.monotonic() - started < seconds - 1:
                raise  # not the deadline: Docker itself failed, and says so above
            code = None
        output = container.logs(tail=400).decode("utf-8", "replace")[-MAX_OUTPUT_CHARS:]
    finally:
        container.remove(force=True)
    return code, output


def _with(found: CheckRun, verdict: Verdict, *, detail: str) -> CheckRun:
    return dataclasses.replace(found, verdict=verdict, detail=detail)
