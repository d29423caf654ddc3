"""Containers a gaffer run left behind when it was killed (kill -9, a crash): swept, then
removed, and only once their owner is proven gone.

Before a container is made, its run writes a record in the state folder
(`containers/<name>.json`: the workspace and the survey taken before it started). A
later gaffer that finds the container, or the record alone, stops the container, sweeps
its workspace against that survey (what it planted is moved out, as at a normal end),
then removes the container and the record. The owner is a token of PID namespace, pid
and start time (workers/processes.py): a pid that is not visible, or that a new process
took, is never taken for a dead owner, and a container without a token is left alone.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from workers import state
from workers.processes import owner_gone
from workers.sandbox import SandboxFault, SandboxUnavailable, guard
from workers.sandbox.guard import Survey

LABEL = "gaffer.sandbox"
OWNER_LABEL = "gaffer.owner"
CHECK_LABEL = "gaffer.check"
"""A check's container (workers/check/run.py): over a copy in the state folder, so there
is nothing to sweep after it, only the container to remove."""
RECORDS = "containers"
# A record holds one survey: a workspace's protected paths and host-run files.
MAX_RECORD_BYTES = 64 * 1024 * 1024


def write_record(name: str, workspace: Path, survey: Survey, owner: str) -> None:
    """What a later gaffer needs to sweep after this container if its run is killed."""
    data = {
        "workspace": os.path.realpath(workspace),
        "owner": owner,
        "host": socket.gethostname(),
        "survey": survey.as_json(),
    }
    state.write_file(_records(), f"{name}.json", json.dumps(data).encode())


def mark_removed(name: str) -> None:
    """The container is gone: a sweep by the next gaffer, if this one's is cut short,
    takes what changed up to now (kept beside the record, never in a file's time)."""
    with contextlib.suppress(OSError):
        state.write_file(_records(), f"{name}.removed", str(time.time_ns()).encode())


def forget(name: str) -> None:
    for suffix in (".json", ".removed"):
        with contextlib.suppress(OSError):
            os.unlink(_records() / f"{name}{suffix}")


def remove_container(docker_client: Any, name: str) -> bool:
    """Force-remove a container by name; True once Docker says it is gone."""
    import docker.errors

    for _ in range(3):
        try:
            docker_client.containers.get(name).remove(force=True)
        except docker.errors.NotFound:
            return True
        except Exception:
            time.sleep(0.5)
            continue
    try:
        docker_client.containers.get(name)
    except docker.errors.NotFound:
        return True
    except Exception:
        return False
    return False


def remove_leftovers(docker_client: Any) -> list[str]:
    """Sweep after and remove the containers of gaffer runs whose owner is proven gone,
    and sweep after records whose container is already gone; the containers' short ids."""
    removed = []
    for container in docker_client.containers.list(all=True, filters={"label": LABEL}):
        labels = container.labels or {}
        if labels.get("gaffer.host") != socket.gethostname():
            continue
        if not owner_gone(labels.get(OWNER_LABEL, "")):
            continue
        running = container.status == "running"
        ended = _ended_ns(container)
        # Removed first: nothing more is planted, and nothing races the sweep.
        if not remove_container(docker_client, container.name):
            continue
        if running:  # it planted until it was removed: that moment is its end
            ended = time.time_ns()
        removed.append(container.short_id)
        _sweep_after(container.name, not_after_ns=ended)
    for container in docker_client.containers.list(all=True, filters={"label": CHECK_LABEL}):
        labels = container.labels or {}
        mine = labels.get("gaffer.host") == socket.gethostname()
        abandoned = mine and owner_gone(labels.get(OWNER_LABEL, ""))
        if abandoned and remove_container(docker_client, container.name):
            removed.append(container.short_id)
    try:
        records = sorted(_records().glob("*.json"))
    except OSError:  # no state folder to be had: nothing was recorded there either
        records = []
    for path in records:
        _sweep_after(path.stem, not_after_ns=_record_time(path), only_if_gone=True)
    return removed


def _ended_ns(container: Any) -> int:
    """When the container stopped (now, for one still running): what changed in its
    workspace after that is the user's, not the container's."""
    finished = ((container.attrs or {}).get("State") or {}).get("FinishedAt") or ""
    if container.status == "running" or finished.startswith("0001-"):
        return time.time_ns()
    with contextlib.suppress(ValueError):
        seconds, _, fraction = finished.rstrip("Z").partition(".")
        stamp = datetime.datetime.fromisoformat(seconds).replace(tzinfo=datetime.UTC)
        return int(stamp.timestamp()) * 1_000_000_000 + int((fraction + "0" * 9)[:9])
    return time.time_ns()


def _record_time(path: Path) -> int:
    """For a record whose container is gone: when the container was removed, or, with no
    word of that, when the record was written (its run was killed before the container
    could plant anything, or the container was removed by hand and when is unknown)."""
    with contextlib.suppress(OSError, ValueError):
        return int(path.with_suffix(".removed").read_text())
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _sweep_after(name: str, not_after_ns: int, only_if_gone: bool = False) -> None:
    """Sweep a record's workspace against its survey, once (a lock on the record keeps
    two gaffers from sweeping the same one), then forget it."""
    try:
        fd = os.open(_records() / f"{name}.json", os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_nlink == 0:
            raise OSError("swept and forgotten by another gaffer meanwhile")
        data = json.loads(os.read(fd, MAX_RECORD_BYTES))
        workspace, owner = Path(data["workspace"]), str(data["owner"])
        survey = Survey.from_json(data["survey"])
        if data.get("host") != socket.gethostname():
            raise ValueError("a record of another machine (a state folder shared)")
    except (OSError, ValueError, KeyError, TypeError):
        os.close(fd)
        return  # another gaffer sweeps it now, or it is not a record of this machine's
    try:
        if only_if_gone and not owner_gone(owner):
            return
        try:
            if workspace.is_dir():
                guard.sweep(workspace, survey, f"{name}-left", not_after_ns)
        except (OSError, SandboxUnavailable, SandboxFault):
            return  # kept: the next gaffer tries again
        forget(name)
    finally:
        os.close(fd)


def _records() -> Path:
    return state.folder_in(state.root(), RECORDS)


def remove_leftovers_if_reachable() -> list[str]:
    """What `remove_leftovers` removed, when a Docker daemon answers at once; nothing
    and no error otherwise (any gaffer start calls this, Docker or not)."""
    host = os.environ.get("DOCKER_HOST", "")
    if not host and not os.path.exists("/var/run/docker.sock"):
        return []
    # Each container is recorded before it starts and forgotten once swept: with no
    # record, nothing was left, and the Docker SDK (a quarter second) is not imported.
    try:
        if not any(_records().glob("*.json")):
            return []
    except OSError:
        return []
    try:
        import docker

        docker_client = docker.from_env(version="auto", timeout=3)
        return remove_leftovers(docker_client)
    except Exception:
        return []
