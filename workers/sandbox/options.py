"""What a container for an agent is made of: the sandbox's own options type, which
profiles (workers/assembly/profiles.py) use for their `[docker]` table."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3}


class DockerOptions(BaseModel):
    """How a `docker` profile's container is made. Mounts, capabilities, devices and the
    user are gaffer's own (workers/sandbox/container.py), never a profile's: a table that
    names one does not load."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    image: str = "gaffer-sandbox:latest"
    """The image; another one for projects that need their own toolchain."""
    network: str = "none"
    """Docker network mode; `none` unless the profile opts into a named network."""
    memory: str = Field("2g", pattern=r"^[1-9][0-9]*[kmg]?$")
    """Memory limit, e.g. 2g or 512m; the container is killed past it (Docker reads 0 as
    no limit at all, so 0 is no value here)."""
    cpus: float = Field(1.0, gt=0, le=64)
    pids: int = Field(512, ge=16)
    """Processes and threads at once: a fork bomb stops here."""
    keep_built: tuple[str, ...] = ()
    """Globs (`*.so`, `build/**`) of what a container builds that lands in the workspace
    though it is not plain source: an extension from `build_ext --inplace`. Start-up
    files, compiled caches and package metadata never land. Your own config only."""

    def shown(self) -> str:
        """Every option, in a line: what a user reads before trusting a profile."""
        return (
            f"image {self.image!r}, network {self.network!r}, memory {self.memory}, "
            f"cpus {self.cpus:g}, pids {self.pids}"
            + (f", keep_built {list(self.keep_built)}" if self.keep_built else "")
        )

    def wider_than(self, ceiling: DockerOptions) -> dict[str, str]:
        """Each option that gives the container more than `ceiling` does, by key, with what
        it asks for: a network other than none or the ceiling's, another image (other code
        on the other side of the tool channel), more memory, cpus or processes."""
        wider = {}
        if self.network not in ("none", ceiling.network):
            wider["network"] = f"network {self.network!r} (allowed: {ceiling.network!r})"
        if self.image != ceiling.image:
            wider["image"] = f"image {self.image!r} (allowed: {ceiling.image!r})"
        if _bytes(self.memory) > _bytes(ceiling.memory):
            wider["memory"] = f"memory {self.memory} (allowed: {ceiling.memory})"
        if self.cpus > ceiling.cpus:
            wider["cpus"] = f"cpus {self.cpus:g} (allowed: {ceiling.cpus:g})"
        if self.pids > ceiling.pids:
            wider["pids"] = f"pids {self.pids} (allowed: {ceiling.pids})"
        if more := [g for g in self.keep_built if g not in ceiling.keep_built]:
            wider["keep_built"] = f"keep_built {more} (allowed: {list(ceiling.keep_built)})"
        return wider


def _bytes(memory: str) -> int:
    """`2g`, `512m`, `1024` (bytes, as Docker reads a bare number) in bytes."""
    unit = _UNITS.get(memory[-1], 1)
    return int(memory.rstrip("kmg")) * unit
