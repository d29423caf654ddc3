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
import json
import os
import socket
from pathlib import Path
from typing import Any

from workers import state
from workers.processes import owner_gone
from workers.sandbox import SandboxUnavailable, guard
from workers.sandbox.guard import Survey

LABEL = "gaffer.sandbox"
OWNER_LABEL = "gaffer.owner"
RECORDS = "containers"


def write_record(name: str, workspace: Path, survey: Survey, owner: str) -> None:
    """What a later gaffer needs to sweep after this container if its run is killed."""
    data = {"workspace": os.path.realpath(workspace), "owner": owner, "survey": survey.as_json()}
    state.write_file(_records(), f"{name}.json", json.dumps(data).encode())


def forget(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(_records() / f"{name}.json")


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
        with contextlib.suppress(Exception):
            container.kill()  # nothing more is planted while its workspace is swept
        _sweep_after(container.name)
        with contextlib.suppress(Exception):
            container.remove(force=True)
            removed.append(container.short_id)
    for path in sorted(_records().glob("*.json")):
        _sweep_after(path.stem, only_if_gone=True)
    return removed


def _sweep_after(name: str, only_if_gone: bool = False) -> None:
    try:
        data = json.loads((_records() / f"{name}.json").read_bytes())
        workspace, owner = Path(data["workspace"]), str(data["owner"])
        survey = Survey.from_json(data["survey"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if only_if_gone and not owner_gone(owner):
        return
    with contextlib.suppress(OSError, SandboxUnavailable):
        if workspace.is_dir():
            guard.sweep(workspace, survey, f"{name}-left")
    forget(name)


def _records() -> Path:
    return state.folder_in(state.root(), RECORDS)


def remove_leftovers_if_reachable() -> list[str]:
    """What `remove_leftovers` removed, when a Docker daemon answers at once; nothing
    and no error otherwise (any gaffer start calls this, Docker or not)."""
    host = os.environ.get("DOCKER_HOST", "")
    if not host and not os.path.exists("/var/run/docker.sock"):
        return []
    try:
        import docker

        docker_client = docker.from_env(version="auto", timeout=3)
        return remove_leftovers(docker_client)
    except Exception:
        return []
