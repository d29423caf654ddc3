"""Containers a gaffer run left behind when it was killed (kill -9, a crash): found by
their labels and the run's process being gone, and removed."""

from __future__ import annotations

import contextlib
import os
import socket
from typing import Any

from workers.processes import process_alive
from workers.sandbox.docker import LABEL


def remove_leftovers(docker_client: Any) -> list[str]:
    """Remove containers of gaffer runs whose process is gone (a crash, a kill -9)."""
    removed = []
    for container in docker_client.containers.list(all=True, filters={"label": LABEL}):
        labels = container.labels or {}
        if labels.get("gaffer.host") != socket.gethostname():
            continue
        if process_alive(int(labels.get("gaffer.pid", "0") or 0)):
            continue
        with contextlib.suppress(Exception):
            container.remove(force=True)
            removed.append(container.short_id)
    return removed


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
