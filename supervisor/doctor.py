"""`gaffer sandbox doctor`: what a worker's container gets, and canaries proving it."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workers.limits import Budget
from workers.profiles import DockerOptions
from workers.sandbox import docker
from workers.sandbox.docker import ContainerSpec, DockerSandbox
from workers.tools import BUILTIN_TOOLS
from workers.tools.base import ToolResult

CANARY_VAR = "GAFFER_DOCTOR_CANARY"


@dataclass(frozen=True)
class Probe:
    name: str
    ok: bool
    detail: str


def describe(spec: ContainerSpec) -> list[str]:
    lines = [
        f"image    {spec.image}",
        f"user     {spec.user} (uid:gid inside the container)",
        f"network  {spec.network}",
        f"limits   memory {spec.memory}, cpus {spec.cpus:g}, pids {spec.pids}",
        "root fs  read-only; tmpfs on /tmp and the home folder",
        "caps     all dropped; no-new-privileges",
    ]
    for host, inside, read_only in spec.mounts:
        lines.append(f"mount    {host} -> {inside} ({'read-only' if read_only else 'read-write'})")
    return lines


def run_probes(workspace: Path, options: DockerOptions, uid: int | None) -> list[Probe]:
    # A value the container must never see: proof that no host variable crosses over.
    canary = secrets.token_hex(8)
    os.environ[CANARY_VAR] = canary
    try:
        with docker.docker_sandbox(
            workspace, options, run_id="doctor", agent_id="doctor", uid=uid
        ) as box:
            return [check(box) for check in _checks(canary)]
    finally:
        os.environ.pop(CANARY_VAR, None)


def _shell(box: DockerSandbox, command: str) -> str:
    tool = BUILTIN_TOOLS["run_shell"]
    result: ToolResult = box.run(
        tool, tool.args.model_validate({"command": command, "timeout": 30}), Budget(max_seconds=60)
    )
    text = result.output.rsplit("\n[", 1)[0]
    return "" if text == "(no output)" else text


def _checks(canary: str) -> list[Callable[[DockerSandbox], Probe]]:
    def outside_writes(box: DockerSandbox) -> Probe:
        targets = [
            "/etc/gaffer-canary",
            "/usr/gaffer-canary",
            "/gaffer-canary",
            "/workspace/.gaffer/canary",
        ]
        _shell(box, " ; ".join(f"touch {t} 2>/dev/null" for t in targets))
        made = _shell(box, " ; ".join(f"test -e {t} && echo {t}" for t in targets)).split()
        return Probe(
            "writing outside /workspace fails",
            not made,
            "created: " + ", ".join(made) if made else "all refused",
        )

    def interfaces(box: DockerSandbox) -> Probe:
        found = _shell(box, "ls /sys/class/net").split()
        return Probe(
            "no network interface but lo", found == ["lo"], "interfaces: " + " ".join(found)
        )

    def not_root(box: DockerSandbox) -> Probe:
        uid = _shell(box, "id -u").strip()
        return Probe("not root", uid not in ("0", ""), f"uid {uid}")

    def no_socket(box: DockerSandbox) -> Probe:
        found = _shell(
            box, "for s in /var/run/docker.sock /run/docker.sock; do test -e $s && echo $s; done"
        ).split()
        return Probe(
            "no Docker socket", not found, "found: " + " ".join(found) if found else "none"
        )

    def no_secrets(box: DockerSandbox) -> Probe:
        env = _shell(box, "env")
        leaked = [name for name in os.environ if f"{name}=" in env and name not in _EXPECTED_ENV]
        ok = canary not in env and not leaked
        return Probe(
            "no host secrets in the environment",
            ok,
            "leaked: " + ", ".join(leaked) if leaked else "none of the host's variables",
        )

    return [outside_writes, interfaces, not_root, no_socket, no_secrets]


# Set inside the container by gaffer or the shell itself, whatever the host has.
_EXPECTED_ENV = {
    "HOME",
    "PATH",
    "LANG",
    "HOSTNAME",
    "PWD",
    "SHLVL",
    "_",
    "PAGER",
    "GIT_PAGER",
    "GIT_TERMINAL_PROMPT",
    "PYTHONDONTWRITEBYTECODE",
    "OLDPWD",
}
