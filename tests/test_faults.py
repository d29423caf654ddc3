"""Faults end cleanly: each drives the real CLI against a local fake endpoint, injects one
fault, and expects a named reason, whole log lines and the right exit code."""

from __future__ import annotations

import time
from pathlib import Path

from tests.fake_openai import Reply, error_reply
from tests.helpers import gaffer_replying, trust_workspace


def test_a_plugin_that_exits_at_import_is_skipped_and_the_run_goes_on(workspace: Path) -> None:
    folder = workspace / ".gaffer" / "tools"
    folder.mkdir(parents=True)
    (folder / "exits.py").write_text("import sys\nsys.exit(3)\n")
    trust_workspace(workspace)
    done, _ = gaffer_replying(workspace, "run", "--no-verify", "hello", replies=[Reply(text="hi")])
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi\n"
    [line] = [line for line in done.stderr.splitlines() if "exits.py" in line]
    assert "skipped: it called sys.exit(3) at import" in line


def test_a_long_retry_after_ends_the_run_at_once_with_the_reason(workspace: Path) -> None:
    started = time.monotonic()
    done, server = gaffer_replying(
        workspace, "run", "hello", replies=[error_reply(429, "slow", **{"Retry-After": "1000"})]
    )
    assert time.monotonic() - started < 15 and len(server.requests) == 1
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()[-1:]
    assert "asks to wait 1000 s before the next try (Retry-After)" in line
