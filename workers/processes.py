"""Small facts about processes on this machine."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable


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


def hide_environment_secrets(is_secret: Callable[[str], bool]) -> list[str]:
    """Overwrite, in this process's original environment block, the values of variables
    that look like secrets; the names of those hidden.

    Any process of the same user (and root's) can read that block as /proc/<pid>/environ,
    so a command gaffer runs could read the API key there (`cat /proc/$PPID/environ`).
    Python keeps its own copy in os.environ, so gaffer still reads the real values.
    """
    try:
        with open("/proc/self/stat", "rb") as f:
            # Fields after the command name; env_start and env_end are fields 50 and 51.
            fields = f.read().rsplit(b")", 1)[1].split()
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
