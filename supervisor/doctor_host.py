"""The probes `gaffer sandbox doctor` plays on the host, and what every probe reports:
untrusted workspace content does not run, instruction files stay confined, the host shell
policy holds against known bypasses, gaffer's own secrets are hidden."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workers import host_programs, trust
from workers.extensions import load_extensions
from workers.log.events import Emitter
from workers.tools import BUILTIN_TOOLS
from workers.tools.memory import project_instructions
from workers.tools.shell import looks_secret
from workers.tools.shell_policy import check

# Commands that once slipped past the host allowlist; each must now need approval.
POLICY_BYPASSES = (
    "find . -de''lete",
    "find . \\-delete",
    "find . ${PWD:+-delete}",
    "find . -ex''ec id ;",
    "git log --out''put=F",
    "sort -uoF x",
    "pytest --basetemp=/tmp/x",
    "cat /proc/$PPID/environ",
    "cat /proc/1/environ",
    "cat ~/.ssh/id_rsa",
)


@dataclass(frozen=True)
class Probe:
    name: str
    ok: bool
    detail: str


def host_checks() -> list[Callable[[], Probe]]:
    def untrusted_content_does_not_run() -> Probe:
        with tempfile.TemporaryDirectory() as scratch:
            workspace, marker = Path(scratch, "ws"), Path(scratch, "ran")
            (workspace / ".gaffer" / "tools").mkdir(parents=True)
            server = {"command": "sh", "args": ["-c", f"touch {marker}"]}
            (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"x": server}}))
            (workspace / ".gaffer" / "tools" / "x.py").write_text(f"open({str(marker)!r}, 'w')\n")
            judged = trust.evaluate(workspace, store=Path(scratch, "trusted.json"))
            extensions = load_extensions(
                judged, Emitter(), taken=set(BUILTIN_TOOLS), log_dir=Path(scratch, "logs")
            )
            extensions.close()
            ran = marker.exists()
        return Probe(
            "a workspace's MCP servers and plugins do not run until trusted",
            not ran,
            "an untrusted server and plugin ran" if ran else "both were skipped",
        )

    def instructions_confined() -> Probe:
        with tempfile.TemporaryDirectory() as scratch:
            workspace = Path(scratch)
            (workspace / "AGENTS.md").symlink_to("/proc/self/environ")
            (workspace / "AGENT.md").symlink_to("/etc/hostname")
            text = project_instructions(workspace)
        return Probe(
            "AGENT.md and AGENTS.md are never read through a link out of the workspace",
            text == "",
            "links to /proc/self/environ and /etc/hostname refused" if not text else "one was read",
        )

    def policy_holds() -> Probe:
        with tempfile.TemporaryDirectory() as scratch:
            slipped = [c for c in POLICY_BYPASSES if check(c, Path(scratch)).allowed]
        return Probe(
            "the host shell policy sees through quoting, expansion and paths out",
            not slipped,
            f"allowed: {'; '.join(slipped)}"
            if slipped
            else f"{len(POLICY_BYPASSES)} known bypasses need approval",
        )

    def own_environment_hidden() -> Probe:
        names = [n for n in os.environ if looks_secret(n) and os.environ[n]]
        seen = host_programs.run(["cat", f"/proc/{os.getpid()}/environ"], timeout=10).stdout
        shown = [n for n in names if os.environ[n].encode() in seen]
        return Probe(
            "gaffer's own secrets are not readable in /proc/<pid>/environ",
            not shown,
            f"readable: {', '.join(shown)}"
            if shown
            else f"{len(names)} secret-looking variable(s) hidden",
        )

    return [
        untrusted_content_does_not_run,
        instructions_confined,
        policy_holds,
        own_environment_hidden,
    ]
