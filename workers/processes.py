"""Small facts about processes on this machine."""

from __future__ import annotations

import os


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
