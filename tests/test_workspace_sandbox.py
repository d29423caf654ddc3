"""A workspace can never widen a sandbox (workers/assembly/profiles.py): a repository's
profile that gives its container a network, another image or more resources than the
user's or gaffer's own profile of its name (a new one: the built-in defaults) does not
load, and the trust review says so before asking; only the user's own config may."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.trust_view import review
from tests.helpers import gaffer
from workers import trust
from workers.assembly.profiles import Profile, ProfileError, load_profiles, search_path
from workers.tools import BUILTIN_TOOLS

DOCKER = (
    'description = "d"\ntools = ["run_shell"]\nsandbox = "docker"\nsystem_prompt = "p"\n[docker]\n'
)


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's own profiles folder, as gaffer finds it."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    return tmp_path / "home" / ".config" / "gaffer" / "profiles"


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text(text)
    return folder / f"{name}.toml"


def from_workspace(workspace: Path) -> dict[str, Profile]:
    """The profiles a run loads with the workspace trusted."""
    trusted = trust.evaluate(workspace, trust_all=True).sources("profile")
    return load_profiles(search_path(), BUILTIN_TOOLS, trusted)


def refusal(workspace: Path) -> str:
    with pytest.raises(ProfileError) as refused:
        from_workspace(workspace)
    return str(refused.value)


def test_a_new_workspace_profile_may_not_open_the_network(workspace: Path, config: Path) -> None:
    write(workspace / ".gaffer" / "profiles", "netcoder", DOCKER + 'network = "host"\n')
    assert refusal(workspace) == (
        ".gaffer/profiles/netcoder.toml: docker.network: a workspace's profile may not widen "
        "its sandbox: network 'host' (allowed: 'none'); only a profile of your own may set it "
        f"({config})"
    )


def test_the_review_refuses_it_before_trust_is_asked(workspace: Path) -> None:
    write(workspace / ".gaffer" / "profiles", "netcoder", DOCKER + 'network = "host"\n')
    shown = gaffer(workspace, "trust")
    lines = shown.stdout.splitlines()
    refused = [line.strip() for line in lines if "netcoder.toml: docker.network" in line]
    assert refused == [
        "does not load: .gaffer/profiles/netcoder.toml: docker.network: a workspace's profile "
        "may not widen its sandbox: network 'host' (allowed: 'none'); only a profile of your "
        f"own may set it ({workspace.parent / 'home' / '.config' / 'gaffer' / 'profiles'})"
    ]
    run = gaffer(
        workspace, "run", "--trust-workspace", "x", env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    )
    assert run.returncode == 1
    assert run.stderr.count("\n") == 1 and "docker.network: a workspace's profile" in run.stderr


def test_the_users_own_config_may_open_the_network(workspace: Path, config: Path) -> None:
    write(config, "netcoder", DOCKER + 'network = "bridge"\n')
    write(config, "coder", '[docker]\nnetwork = "bridge"\n')
    profiles = from_workspace(workspace)
    assert profiles["netcoder"].docker.network == "bridge"
    # Under the user's ceiling, a workspace's override keeps or narrows what the user opened.
    write(workspace / ".gaffer" / "profiles", "coder", 'model = "small"\n')
    write(workspace / ".gaffer" / "profiles", "netcoder", '[docker]\nnetwork = "none"\n')
    profiles = from_workspace(workspace)
    assert profiles["coder"].docker.network == "bridge"
    assert profiles["netcoder"].docker.network == "none"
    write(workspace / ".gaffer" / "profiles", "coder", '[docker]\nnetwork = "host"\n')
    assert "coder.toml: docker.network: a workspace's profile may not widen its sandbox: " in (
        refusal(workspace)
    )
    assert "network 'host' (allowed: 'bridge')" in refusal(workspace)


@pytest.mark.parametrize(
    ("option", "wider", "narrower"),
    [
        ("image", 'image = "alpine:latest"', 'image = "gaffer-sandbox:latest"'),
        ("memory", 'memory = "4096m"', 'memory = "512m"'),
        ("cpus", "cpus = 8", "cpus = 0.5"),
        ("pids", "pids = 100000", "pids = 64"),
    ],
)
def test_no_option_gives_a_workspace_s_container_more_than_the_built_in(
    workspace: Path, config: Path, option: str, wider: str, narrower: str
) -> None:
    profiles = workspace / ".gaffer" / "profiles"
    write(profiles, "mine", DOCKER + narrower + "\n")
    assert "mine" in from_workspace(workspace)
    write(profiles, "mine", DOCKER + wider + "\n")
    assert f"mine.toml: docker.{option}: a workspace's profile may not widen" in refusal(workspace)
    write(profiles, "mine", "")
    write(profiles, "coder", f"[docker]\n{wider}\n")
    assert f"coder.toml: docker.{option}: " in refusal(workspace), "nor an override of coder"
    write(config, "mine", DOCKER + wider + "\n")
    (profiles / "coder.toml").unlink()
    (profiles / "mine.toml").unlink()
    assert "mine" in from_workspace(workspace), "the user's own config may"


def test_a_host_profile_may_not_carry_a_wider_container_either(workspace: Path) -> None:
    write(
        workspace / ".gaffer" / "profiles",
        "hosted",
        DOCKER.replace('"docker"', '"none"') + 'network = "host"\n',
    )
    assert "hosted.toml: docker.network: " in refusal(workspace)


@pytest.mark.parametrize(
    "planted",
    [
        'cap_add = ["SYS_ADMIN"]',
        'devices = ["/dev/kvm"]',
        'mounts = ["/:/host"]',
        'volumes = ["/var/run/docker.sock:/var/run/docker.sock"]',
        'user = "0:0"',
        "privileged = true",
    ],
)
def test_mounts_capabilities_devices_and_the_user_are_no_profile_s(
    workspace: Path, config: Path, planted: str
) -> None:
    key = planted.split(" ")[0]
    write(workspace / ".gaffer" / "profiles", "mine", DOCKER + planted + "\n")
    assert f"mine.toml: docker.{key}: Extra inputs are not permitted" in refusal(workspace)
    (workspace / ".gaffer" / "profiles" / "mine.toml").unlink()
    write(config, "mine", DOCKER + planted + "\n")
    with pytest.raises(ProfileError, match=f"docker.{key}: Extra inputs"):
        load_profiles(search_path(), BUILTIN_TOOLS)


def test_the_review_shows_every_option_of_a_workspace_profile_s_container(
    workspace: Path, config: Path
) -> None:
    write(workspace / ".gaffer" / "profiles", "small", DOCKER + 'memory = "1g"\npids = 64\n')
    shown = "\n".join(review(trust.evaluate(workspace)))
    assert (
        "profile 'small': tools run_shell; runs in Docker (image 'gaffer-sandbox:latest', "
        "network 'none', memory 1g, cpus 1, pids 64)"
    ) in shown
    assert "does not load" not in shown


def test_no_profile_may_lift_the_memory_limit() -> None:
    """Docker reads a memory limit of 0 as none at all: it is no value, from anyone."""
    from pydantic import ValidationError

    from workers.sandbox.options import DockerOptions

    for memory in ("0", "0m", "00g"):
        with pytest.raises(ValidationError):
            DockerOptions(memory=memory)
