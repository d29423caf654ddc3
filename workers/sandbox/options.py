"""What a container for an agent is made of: the sandbox's own options type, which
profiles (workers/assembly/profiles.py) use for their `[docker]` table."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DockerOptions(BaseModel):
    """How a `docker` profile's container is made."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    image: str = "gaffer-sandbox:latest"
    """The image; another one for projects that need their own toolchain."""
    network: str = "none"
    """Docker network mode; `none` unless the profile opts into a named network."""
    memory: str = Field("2g", pattern=r"^[0-9]+[kmg]?$")
    """Memory limit, e.g. 2g or 512m; the container is killed past it."""
    cpus: float = Field(1.0, gt=0, le=64)
    pids: int = Field(512, ge=16)
    """Processes and threads at once: a fork bomb stops here."""
