"""The doctor's probes for the fourth attacker review's findings: each plays the attack in
a scratch folder or the doctor's own container and passes only when the defence held."""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Callable
from pathlib import Path

from supervisor.doctor_host import Probe
from supervisor.terminal import one_line
from workers import host_programs, state, trust
from workers.assembly.profiles import ProfileError, load_profiles, search_path
from workers.model.masking import Mask
from workers.sandbox.quarantine import Quarantined
from workers.tools import BUILTIN_TOOLS

# A key shaped as a real one, never sent anywhere: only masked.
PROBE_KEY = "sk-doctor-probe-0123456789abcdef"


def host_findings() -> list[Callable[[], Probe]]:
    return [
        _no_workspace_python,
        _one_line_names,
        _key_masked,
        _no_network_from_a_workspace,
        _node_root_refuses_a_link,
    ]


def _no_workspace_python() -> Probe:
    with tempfile.TemporaryDirectory(prefix="gaffer-doctor-") as folder:
        marker = Path(folder, "ran")
        for name in ("typing", "json", "encodings", "sitecustomize"):
            code = f"import posix\nposix.close(posix.open({str(marker)!r}, 0o101, 0o644))\n"
            Path(folder, f"{name}.py").write_text(code)
        done = host_programs.run(host_programs.python("-c", "import json"), cwd=folder, timeout=30)
        ran = marker.exists()
    return Probe(
        "Python that gaffer starts on the host imports nothing from the folder it runs in",
        not ran and done.returncode == 0,
        "a planted typing.py ran" if ran else "isolated (-I): typing.py, json.py stayed unread",
    )


def _one_line_names() -> Probe:
    shown = one_line("server" + "\n" * 80 + "approved\u200b\u202e")
    fine = "\n" not in shown and "\u200b" not in shown and "\u202e" not in shown
    return Probe(
        "names in the trust review and approval prompt stay on one line, hidden marks shown",
        fine,
        "newlines and format characters written out" if fine else f"shown as {shown!r}",
    )


def _key_masked() -> Probe:
    mask = Mask([PROBE_KEY])
    echoed = base64.b64encode(f"user:{PROBE_KEY}".encode()).decode()
    shown = mask(f"bad auth: Basic {echoed}; Bearer {PROBE_KEY.encode().hex()}")
    leaked = echoed in shown or PROBE_KEY.encode().hex() in shown
    return Probe(
        "the API key is masked in an endpoint's error however it is encoded",
        not leaked,
        "base64 and hex forms masked" if not leaked else "an encoded key was shown",
    )


def _no_network_from_a_workspace() -> Probe:
    with tempfile.TemporaryDirectory(prefix="gaffer-doctor-") as folder:
        profiles = Path(folder, ".gaffer", "profiles")
        profiles.mkdir(parents=True)
        (profiles / "netcoder.toml").write_text(
            'description = "d"\ntools = ["run_shell"]\nsandbox = "docker"\n'
            'system_prompt = "p"\n[docker]\nnetwork = "host"\n'
        )
        sources = trust.evaluate(Path(folder), trust_all=True).sources("profile")
        try:
            load_profiles(search_path(), BUILTIN_TOOLS, sources)
            refused = ""
        except ProfileError as error:
            refused = str(error)
    return Probe(
        "a workspace profile cannot open its container's network, even trusted",
        "network" in refused,
        "refused before trust" if refused else "it loaded with network 'host'",
    )


def _node_root_refuses_a_link() -> Probe:
    with tempfile.TemporaryDirectory(prefix="gaffer-doctor-") as folder:
        elsewhere = Path(folder, "elsewhere")
        elsewhere.mkdir(mode=0o700)
        Path(folder, "gaffer-node").symlink_to(elsewhere)
        try:
            state.private_root(Path(folder, "gaffer-node"))
            refused = False
        except OSError:
            refused = True
    return Probe(
        "a folder gaffer keeps checkouts under is refused when it is a link (a node's root)",
        refused,
        "refused, never used" if refused else "the link was used",
    )


# What the doctor's container does for the probes below (inside `folder`).
def container_attack(folder: str) -> str:
    return (
        "setsid sh -c 'sleep 300' >/dev/null 2>&1 < /dev/null & "
        f"mkdir -p {folder}/zz.egg-info && "
        f"cp /bin/true {folder}/m.cpython-311-x86_64-linux-gnu.so && "
        f"printf '[pytest11]\\nzz = zz\\n' > {folder}/zz.egg-info/entry_points.txt && "
        f"printf 'a\\0b' > {folder}/data.bin && echo started"
    )


LEFT_BEHIND = "ps -eo args | grep -c '[s]leep 300'"


def after_container(left_behind: str, quarantined: list[Quarantined], folder: str) -> list[Probe]:
    """`left_behind`: what LEFT_BEHIND printed in the call after the attack."""
    wanted = {f"{folder}/{p}" for p in ("zz.egg-info", "m.cpython-311-x86_64-linux-gnu.so")}
    wanted.add(f"{folder}/data.bin")
    left = sorted(p for p in wanted if not taken(p, quarantined))
    return [
        Probe(
            "a detached process (setsid) ends with the call that started it",
            left_behind.strip() == "0",
            "none left" if left_behind.strip() == "0" else f"{left_behind.strip()} still running",
        ),
        Probe(
            "a compiled extension, an entry point and a binary a container made never land",
            not left,
            "moved aside" if not left else f"landed: {', '.join(left)}",
        ),
    ]


def taken(path: str, quarantined: list[Quarantined]) -> bool:
    """Whether `path` was moved aside, itself or with a folder above it."""
    return any(path == q.path or path.startswith(q.path + "/") for q in quarantined)
