"""What a worker's container is made of: its mounts, user, limits and environment, and
the call that creates it (workers/sandbox/docker.py runs it and talks to its tool server)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workers import state
from workers.sandbox import SandboxUnavailable, leftovers
from workers.sandbox.options import DockerOptions
from workers.tools import outputs

WORKSPACE = "/workspace"
HOME = "/home/gaffer"
# No compiled caches written by the container's own Python: one that appears in the
# workspace was planted, and is taken out (host_runs.py).
ENVIRONMENT = {
    "HOME": HOME,
    "LANG": "C.UTF-8",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "PYTHONDONTWRITEBYTECODE": "1",
    # HOME is the container's own: a .pth a command leaves in its user site would run in
    # every later Python, the test runs gaffer believes included.
    "PYTHONNOUSERSITE": "1",
}
# The keeper (the container's init and its `sleep infinity`) runs as a uid no command
# has: after every call the tool server ends every process of its own uid, which would
# otherwise end the container too; and no command can signal the keeper.
KEEPER_UID = 65534  # nobody


@dataclass(frozen=True)
class ContainerSpec:
    """Everything that decides what the container can reach: printed by `sandbox doctor`."""

    image: str
    user: str
    network: str
    memory: str
    cpus: float
    pids: int
    mounts: list[tuple[str, str, bool]]
    """(host path, container path, read-only)."""


def container_spec(
    workspace: Path,
    options: DockerOptions,
    uid: int | None = None,
    protected: tuple[str, ...] = (),
    git_dir: Path | None = None,
    output_dir: Path | None = None,
    *,
    read_only: tuple[str, ...] = (),
) -> ContainerSpec:
    """The container for this workspace; `protected` paths (guard.survey) are read-only,
    and so are the plain files of `read_only` (the tests the task keeps: a command that
    writes, moves or deletes one fails); `output_dir`, a folder of this container's own
    outside the workspace, is where its commands' long output is saved.
    `git_dir`: for an isolated editor's worktree, the repository it belongs to, read-only
    at its own path, where the worktree's `.git` file points (so git works inside)."""
    real = Path(os.path.realpath(workspace))
    own = os.path.realpath(state.root_path())
    if own == str(real) or own.startswith(str(real) + os.sep):
        raise SandboxUnavailable(
            f"gaffer's state folder {own} is inside the workspace {real}, where a container "
            "could rename a folder above it and forge what gaffer reads back; set "
            "XDG_STATE_HOME to a folder outside the workspace"
        )
    owner = real.stat()
    user_id = owner.st_uid if uid is None else uid
    if user_id == 0:
        raise SandboxUnavailable(
            f"the workspace {real} is owned by root and workers never run as root; "
            "chown it to your user, or name a uid with --sandbox-uid"
        )
    group = owner.st_gid if uid is None else uid
    mounts = [(str(real), WORKSPACE, False)]
    for rel in dict.fromkeys(protected):
        mounts.append((str(real / rel), f"{WORKSPACE}/{rel}", True))
    for rel in dict.fromkeys(read_only):
        if rel not in protected and _plain_file_inside(real, rel):
            mounts.append((str(real / rel), f"{WORKSPACE}/{rel}", True))
    if output_dir is not None:  # command output too long for the model is saved here
        mounts.append((str(output_dir), str(outputs.CONTAINER_FOLDER), False))
    if git_dir is not None:
        mounts.append((str(git_dir), str(git_dir), True))
    return ContainerSpec(
        image=options.image,
        user=f"{user_id}:{group}",
        network=options.network,
        memory=options.memory,
        cpus=options.cpus,
        pids=options.pids,
        mounts=mounts,
    )


def _plain_file_inside(root: Path, rel: str) -> bool:
    """Whether `rel` is a plain file of the workspace reached through no link: Docker would
    mount what a link points at, wherever that is."""
    path = root / rel
    if path.is_symlink() or os.path.realpath(path) != str(root / os.path.normpath(rel)):
        return False
    return path.is_file()


def create(
    docker_client: Any, spec: ContainerSpec, name: str, owner: str, run_id: str, agent_id: str
) -> Any:
    from docker.types import LogConfig, Mount

    return docker_client.containers.create(
        spec.image,
        name=name,
        # The main process only keeps the container alive; the tool server is exec'd.
        command=["sleep", "infinity"],
        init=True,  # an init as PID 1 reaps what commands leave behind
        user=keeper_user(spec.user),
        # The keeper may not enter a workspace that only its owner reads; the tool
        # server and its commands get /workspace from `docker exec`.
        working_dir="/",
        environment=ENVIRONMENT,
        network_mode=spec.network,
        **confined(spec.memory, spec.cpus, spec.pids),
        # Nothing reads the main process's output, and a command that floods /proc/1/fd/1
        # must not fill the host's disk with Docker's log of it.
        log_config=LogConfig(type=LogConfig.types.NONE),
        mounts=[Mount(target=t, source=s, type="bind", read_only=ro) for s, t, ro in spec.mounts],
        labels={
            leftovers.LABEL: "1",
            "gaffer.run": run_id,
            "gaffer.agent": agent_id,
            leftovers.OWNER_LABEL: owner,
            "gaffer.host": socket.gethostname(),
        },
    )


def confined(memory: str, cpus: float, pids: int) -> dict[str, Any]:
    """What every gaffer container is held to: no capabilities or new privileges, a
    read-only root with small scratch folders, and its memory, CPU and process limits."""
    return {
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "read_only": True,
        "tmpfs": {"/tmp": "rw,exec,size=512m,mode=1777", HOME: "rw,size=128m,mode=1777"},
        "mem_limit": memory,
        "memswap_limit": memory,
        "nano_cpus": int(cpus * 1e9),
        "pids_limit": pids,
    }


def keeper_user(user: str) -> str:
    """The keeper's uid:gid, never the uid of `user` (the workspace owner's, "uid:gid")."""
    uid = KEEPER_UID if user.split(":")[0] != str(KEEPER_UID) else KEEPER_UID - 1
    return f"{uid}:{uid}"


def output_folder(workspace: Path, label: str, uid: int | None) -> Path:
    """A folder of this container's own in the workspace's state folder, for saved output:
    writable by the container's user, reachable by nobody else (its parents are 0700)."""
    try:
        folder = state.workspace_dir(workspace, state.OUTPUT, label)
    except OSError as error:
        raise SandboxUnavailable(f"cannot make a folder for command output: {error}") from error
    owner = os.stat(os.path.realpath(workspace))
    if os.geteuid() == 0:
        os.chown(folder, owner.st_uid if uid is None else uid, owner.st_gid if uid is None else uid)
    elif (owner.st_uid if uid is None else uid) != os.geteuid():
        os.chmod(folder, 0o777)
    return folder
