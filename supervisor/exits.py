"""How a `gaffer` command ends: its exit codes, and one line on stderr when it fails."""

from __future__ import annotations

import json
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
EXIT_SHORTFALL = 3
"""The answer came, but something the run started did not hold: a worker that did not
complete, a change that conflicted or was not applied, a command that was denied."""
EXIT_UNVERIFIED = 4
"""The answer came, but a change it made was unverified, under --require-verified."""
EXIT_USAGE = 64  # a flag or argument gaffer cannot take (sysexits' EX_USAGE)
EXIT_LOG_LOST = 74
"""The run finished and its answer is on stdout, but its log could not be written in full
(sysexits' EX_IOERR)."""


TERMINATED = threading.Event()
"""SIGTERM, SIGHUP or SIGQUIT arrived: the run ends as on Ctrl-C (every worker and
container ended and swept, the log's last lines written), and exits 128 + the signal."""
# Every signal that asks a process to end, besides Ctrl-C: a closed terminal is SIGHUP.
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_ending: list[signal.Signals] = []


def end_on_sigterm() -> None:
    """SIGTERM, SIGHUP and SIGQUIT end a run as Ctrl-C does, instead of killing gaffer
    where it stands (which would leave its containers up and unswept)."""

    def terminate(signum: int, _frame: FrameType | None) -> None:
        _ending.append(signal.Signals(signum))
        TERMINATED.set()
        raise KeyboardInterrupt

    for ending in ENDING_SIGNALS:
        signal.signal(ending, terminate)


def terminated_by() -> tuple[int, str]:
    """The exit code and name of the signal that ended the run (SIGTERM if unknown)."""
    ending = _ending[0] if _ending else signal.SIGTERM
    return 128 + ending.value, ending.name


_as_json: list[bool] = [False]


def results_as_json(on: bool) -> None:
    """Whether a failure before the run also prints a result object on stdout: the
    command was asked for `--output-format json` (or stream-json)."""
    _as_json[0] = on


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """The command ends with one line on stderr and its exit code (and, asked for JSON,
    a result object on stdout saying the same)."""
    if _as_json[0]:
        echo(json.dumps(failure_result(message, code)))
    echo(f"gaffer: {message}", err=True)
    sys.exit(code)


def failure_result(message: str, code: int) -> dict[str, object]:
    """The result object of a command that ended before any run: the run result's
    fields that can be said, under the same names."""
    return {
        "type": "result",
        "subtype": "error_during_execution",
        "is_error": True,
        "result": "",
        "status": "usage_error" if code == EXIT_USAGE else "failed",
        "reason": message,
        "exit_code": code,
        "error": message,
        # before any run: a flag gaffer cannot take, or a setting or setup it cannot use
        "error_kind": "usage" if code == EXIT_USAGE else "config",
    }


def log_dir_here(log_dir: Path | None) -> Path:
    """Where this workspace's run logs are: `log_dir`, else config, else the workspace's
    folder in gaffer's state folder."""
    from supervisor import settings, trust_view

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
