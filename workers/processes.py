"""Small facts about processes on this machine."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

# The kernel stamps ctime from a coarse clock, up to a tick (1-10 ms) behind
# time.time_ns(): a window judged by ctime opens this much earlier.
CLOCK_SLACK_NS = 20_000_000


def process_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal still counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_token(pid: int | None = None) -> str:
    """Who owns a thing gaffer leaves on the machine while it runs (a container, a copy):
    `<pid namespace>_<boot>.<pid>.<start time>`, so `owner_gone` can prove its owner ended."""
    pid = os.getpid() if pid is None else pid
    return f"{_pid_namespace()}.{pid}.{_start_time(pid)}"


def owner_gone(token: str) -> bool:
    """True only when the owner named by `owner_token` has surely ended: it was of this
    PID namespace, and no process with its pid and start time is there now. A token of
    another namespace, or one that cannot be read, is never taken for gone: a pid that is
    not visible proves nothing, and a pid reused by another process is not the owner."""
    namespace, _, rest = token.partition(".")
    pid_text, _, started = rest.partition(".")
    if not namespace or not pid_text.isdigit() or not started.isdigit():
        return False
    if namespace != _pid_namespace():
        return False
    pid = int(pid_text)
    if not process_alive(pid):
        return True
    now = _start_time(pid)
    return now not in ("0", started)  # unreadable (hidepid) proves nothing


def _pid_namespace() -> str:
    """This PID namespace on this boot of this machine: the namespace's inode alone is the
    same number on most machines' hosts, so the boot's id goes with it."""
    try:
        namespace = os.readlink("/proc/self/ns/pid").removeprefix("pid:[").rstrip("]")
    except OSError:
        namespace = "0"
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip().replace("-", "")[:12]
    except OSError:
        boot = "0"
    return f"{namespace}_{boot}"


def _stat_fields(pid: int | str) -> list[bytes]:
    """/proc/PID/stat's fields after the command name (field 3 first); OSError, or
    IndexError when there are none."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (/proc/PID/stat, field 22)."""
    try:
        return _stat_fields(pid)[19].decode()
    except (OSError, IndexError):
        return "0"


def hide_environment_secrets(is_secret: Callable[[str], bool]) -> list[str]:
    """Overwrite, in this process's original environment block, the values of variables
    that look like secrets; the names of those hidden.

    Any process of the same user (and root's) can read that block as /proc/<pid>/environ,
    so a command gaffer runs could read the API key there (`cat /proc/$PPID/environ`).
    Python keeps its own copy in os.environ, so gaffer still reads the real values.
    """
    try:
        fields = _stat_fields("self")  # env_start and env_end are fields 50 and 51
        start, end = int(fields[47]), int(fields[48])
        block = ctypes.string_at(start, end - start)
    except (OSError, ValueError, IndexError):
        return []
    hidden, offset = [], 0
    for entry in block.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and value and is_secret(name.decode("utf-8", errors="replace")):
            ctypes.memset(start + offset + len(name) + 1, ord("*"), len(value))
            hidden.append(name.decode("utf-8", errors="replace"))
        offset += len(entry) + 1
    return hidden
