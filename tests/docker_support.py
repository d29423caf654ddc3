"""What the Docker tests share: a real daemon, the built image, a user-owned workspace."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.conftest import must_run_here
from workers.sandbox import SandboxUnavailable, docker

USER_UID = 1000  # a workspace owned by an ordinary user, as a checkout would be


def require_docker() -> Any:
    """The Docker client; with GAFFER_REQUIRE_DOCKER=1 (CI) a missing daemon or image fails."""
    try:
        client = docker.client()
        docker.check_image(client, "gaffer-sandbox:latest")
    except SandboxUnavailable as error:
        must_run_here(f"no Docker sandbox here: {error}")
    return client


def user_workspace(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    chown_tree(path)
    return path


def chown_tree(path: Path) -> None:
    if os.geteuid() != 0:
        return
    os.chown(path, USER_UID, USER_UID)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), USER_UID, USER_UID)
