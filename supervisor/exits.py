"""How a `gaffer` command ends: its exit codes, and one line on stderr when it fails."""

from __future__ import annotations

import shlex
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import NoReturn

from supervisor.terminal import echo
from workers.tools.git_paths import workspace_for

EXIT_OK, EXIT_ERROR, EXIT_LIMIT, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_USAGE = 64  # a flag or argument gaffer cannot take (sysexits' EX_USAGE)
EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports it
EXIT_LOG_LOST = 74
"""The run finished and its answer is on stdout, but its log could not be written in full
(sysexits' EX_IOERR)."""


TERMINATED = threading.Event()
"""SIGTERM arrived: the run ends as on Ctrl-C, and exits EXIT_TERMINATED."""


def end_on_sigterm() -> None:
    """SIGTERM ends a run as Ctrl-C does (every worker and container ended, the log's
    last lines written), instead of killing gaffer where it stands."""

    def terminate(_signum: int, _frame: FrameType | None) -> None:
        TERMINATED.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """The command ends with one line on stderr and its exit code."""
    echo(f"gaffer: {message}", err=True)
    sys.exit(code)


def log_dir_here(log_dir: Path | None) -> Path:
    """Where this workspace's run logs are: `log_dir`, else config, else the workspace's
    folder in gaffer's state folder."""
    from supervisor import settings
    from supervisor import trust as trust_view

    workspace = workspace_for(Path.cwd())
    try:
        config = settings.load({"log_dir": log_dir}, trust_view.evaluate(workspace).config())
    except settings.ConfigError as error:
        fail(str(error))
    say_legacy_logs(workspace, config.log_dir)
    try:
        return config.logs_in(workspace)
    except OSError as error:
        fail(str(error))


def say_legacy_logs(workspace: Path, log_dir: Path | None) -> None:
    """One line when an older gaffer's logs sit in the workspace: they are never read as
    gaffer's own (a repository can ship such files), and the user may move theirs."""
    from workers import state

    count = state.legacy_logs(workspace) if log_dir is None else 0
    if count:
        old = workspace / ".gaffer" / "logs"
        echo(
            f"gaffer: {old} holds {count} run log(s) from an older gaffer; they are not read "
            "(a repository can ship such files). If they are your own runs, move them: "
            f"mv {shlex.quote(str(old))}/* {shlex.quote(str(state.workspace_dir(workspace, state.LOGS)))}/",
            err=True,
        )
