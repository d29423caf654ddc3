"""The log's schema: one frozen dataclass per event, the only way to emit one.

Each field is a key of the event's jsonl line (logs/README.md says what it means; a test
holds the two together). A field marked `absent_when_none` is left out of the line when
it is None, so older readers see the same lines as before; every other field is always
written, None included. Besides these, each line carries `ts`, `event` and the identity
its emitter was bound to (session_id, agent_id, parent_id, profile)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workers.log.event_base import EVENTS, Event, Record, absent_when_none

__all__ = ["EVENTS", "Event", "Record", "absent_when_none"]


@dataclass(frozen=True)
class SessionStart(Event):
    event = "session_start"
    task: str
    workspace: str
    model: str
    base_url: str | None
    gaffer_version: str
    pid: int
    profile: str
    max_steps: int
    max_seconds: float | None
    max_tokens: int | None
    resumed_from: str | None


@dataclass(frozen=True)
class SessionEnd(Event):
    event = "session_end"
    status: str
    reason: str
    elapsed_s: float
    steps: int
    tokens: int
    prompt_tokens: int
    completion_tokens: int
    llm_calls: int
    retries: int
    tool_calls: int
    tool_errors: int
    workers: int
    exit_code: int | None = absent_when_none()  # gaffer run's; status says it in words


@dataclass(frozen=True)
class AgentStart(Event):
    event = "agent_start"
    model: str
    tools: list[str]
    sandbox: str
    max_steps: int
    max_seconds: float | None
    max_tokens: int | None
    snapshot: str | None = absent_when_none()
    """An agent that can change files: the workspace's snapshot as it starts."""
    worktree: str | None = absent_when_none()
    """An isolated editor: its copy of the workspace (workers/changes/worktrees.py)."""


@dataclass(frozen=True)
class AgentEnd(Event):
    event = "agent_end"
    status: str
    reason: str
    steps: int
    tokens: int
    tool_calls: int
    answer: str | None
    traceback: str | None = absent_when_none()


@dataclass(frozen=True)
class ChangeSet(Event):
    event = "change_set"
    before: str
    """The snapshot the agent started from (workers/changes/snapshots.py)."""
    after: str
    files: list[Record]
    """Each change (workers/changes/change_sets.py Change.as_json): path, kind, hashes, sizes."""
    diff_file: str | None
    """The unified diff, relative to the log's folder; None when it could not be written."""
    ignored: list[Record] | None = absent_when_none()
    """What changed among git-ignored files and caches (workers/changes/ignored_changes.py):
    path, change, size, mtime_ns; absent when nothing did."""


@dataclass(frozen=True)
class Merge(Event):
    """An isolated editor's change set brought into the workspace (workers/changes/merging.py)."""

    event = "merge"
    status: str
    """`applied`, `conflict` (nothing written), `nothing` (no change to bring in) or
    `skipped` (cancelled before it could)."""
    files: list[Record]
    """What changed in the workspace, as change_set's `files`."""
    conflicts: list[Record]
    """Each conflict: `path`, `why`, `hunks`."""
    before: str | None = absent_when_none()
    after: str | None = absent_when_none()
    """The workspace's snapshots around the write."""
    reason: str | None = absent_when_none()


@dataclass(frozen=True)
class TurnStart(Event):
    event = "turn_start"
    step: int


@dataclass(frozen=True)
class LlmCall(Event):
    event = "llm_call"
    step: int
    model: str
    prompt_tokens: int
    cached_tokens: int | None
    completion_tokens: int
    total_tokens: int
    usage_reported: bool
    elapsed_s: float
    attempt: int
    finish_reason: str | None
    tool_calls: int
    text: str
    calls: list[dict[str, str]]
    """The whole turn, so a run can be read back and resumed from its log alone."""
    aside: bool | None = absent_when_none()
    """A call outside the conversation (the focused ask): a resume skips it."""
    temperature: float | None = absent_when_none()
    """The call's own sampling temperature (a fresh attempt); absent: the configured one."""
    max_tokens: int | None = absent_when_none()
    """The call's own output cap (a fresh attempt's); absent: the configured one."""
    stop: list[str] | None = absent_when_none()
    """Text that ends the reply where it would begin, asked of the server (a block
    writer's, where a block for a test it may not write would begin); absent: none."""
    reasoning_tokens: int | None = absent_when_none()
    """Completion tokens spent reasoning, when the server says (the Responses API)."""
    reasoning: list[Record] | None = absent_when_none()
    """The reasoning items the server returned, verbatim: a resume sends them back."""
    varied: int | None = absent_when_none()
    """Bad replies in a row before this call, which it was sampled away from."""
    same_as: int | None = absent_when_none()
    """The step of an earlier reply of the run that this one is the same as, byte for byte."""
    runaway: str | None = absent_when_none()
    """What the reply kept repeating when gaffer ended its stream there."""
    server_prompt_s: float | None = absent_when_none()
    """The seconds the server says it spent reading the prompt tokens it had not cached
    (llama.cpp's `timings`); absent: it did not say."""
    server_reply_s: float | None = absent_when_none()
    """The seconds the server says it spent writing the reply; absent: it did not say."""


@dataclass(frozen=True)
class LlmRetry(Event):
    event = "llm_retry"
    step: int
    attempt: int
    error: str
    wait_s: float


@dataclass(frozen=True)
class ToolCalled(Event):
    event = "tool_call"
    step: int
    name: str
    tool_call_id: str
    args: dict[str, Any] | str
    label: str
    is_error: bool
    elapsed_s: float
    summary: str
    result_preview: str
    result_chars: int
    content: str
    sandbox: str
    from_block: bool | None = absent_when_none()
    container: str | None = absent_when_none()
    facts: Record | None = absent_when_none()


@dataclass(frozen=True)
class DelegateStart(Event):
    event = "delegate_start"
    child_id: str
    child_profile: str
    task: str
    tools: list[str]
    sandbox: str
    parallel_safe: bool
    max_steps: int
    max_seconds: float | None
    max_tokens: int | None


@dataclass(frozen=True)
class DelegateEnd(Event):
    event = "delegate_end"
    child_id: str
    child_profile: str
    status: str
    reason: str
    steps: int
    tokens: int
    tool_calls: int
    elapsed_s: float
    files_changed: list[str]


@dataclass(frozen=True)
class Verification(Event):
    event = "verification"
    verdict: str
    reason: str
    action: str
    sent_back: int
    failed: bool | None = absent_when_none()
    """True when the change's last test run (or gaffer's check) failed, not merely went
    unrun; a command after it that exited nonzero (a grep that found nothing) is not."""


@dataclass(frozen=True)
class CheckChosen(Event):
    """The run's check, chosen as a turn begins (workers/check/choose.py)."""

    event = "check_chosen"
    line: str
    """As the run's start says it: "check: `cmd` (named in the task)", or "unchecked: why"."""
    command: str | None = absent_when_none()
    source: str | None = absent_when_none()
    baseline: str | None = absent_when_none()
    """The snapshot of the workspace the check puts kept files back to (a resumed run's is
    its first run's)."""


@dataclass(frozen=True)
class CheckRan(Event):
    """The run's check, run by gaffer itself (workers/check/) when an agent that changed
    files answers, and at the run's end: its verdict."""

    event = "check"
    verdict: str
    """verified, failed, timed_out or unchecked."""
    detail: str
    line: str
    """The verdict in the user's terms, as the last stderr line says it."""
    seconds: float
    command: str | None = absent_when_none()
    source: str | None = absent_when_none()
    """flag, config, task or project."""
    exit: int | None = absent_when_none()
    passed: int | None = absent_when_none()
    failed: int | None = absent_when_none()
    reused: bool | None = absent_when_none()
    """The workspace had not changed since the last check: its verdict, not run again."""


@dataclass(frozen=True)
class FreshAttempt(Event):
    """A sample of the change drawn afresh for an agent stuck on a failing test
    (workers/aids/fresh_attempts.py): kept when the tests passed, else taken back."""

    event = "fresh_attempt"
    attempt: int
    temperature: float
    files: list[str]
    command: str | None
    exit_code: int | None
    kept: bool
    reason: str
    made_from: list[int] | None = absent_when_none()
    """A join (no model call): the two samples it was made from, the base first."""


@dataclass(frozen=True)
class Limit(Event):
    event = "limit"
    limit: str
    detail: str


@dataclass(frozen=True)
class Compaction(Event):
    event = "compaction"
    step: int
    reason: str
    tokens_before: int
    tokens_after: int
    tokens_after_is_estimate: bool
    messages_folded: int
    summary_tokens: int
    elapsed_s: float
    state: str


@dataclass(frozen=True)
class McpCall(Event):
    event = "mcp_call"
    server: str
    tool: str
    args: dict[str, Any]
    is_error: bool
    elapsed_s: float
    result_preview: str


@dataclass(frozen=True)
class UserMessage(Event):
    event = "user_message"
    content: str
    source: str


@dataclass(frozen=True)
class Extension(Event):
    event = "extension"
    status: str
    message: str | None = absent_when_none()
    tool: str | None = absent_when_none()
    origin: str | None = absent_when_none()
    read_only: bool | None = absent_when_none()


@dataclass(frozen=True)
class Boundary(Event):
    event = "boundary"
    action: str
    what: str
    message: str
    path: str | None = absent_when_none()
    moved_to: str | None = absent_when_none()
    paths: list[str] | None = absent_when_none()
    count: int | None = absent_when_none()


@dataclass(frozen=True)
class TextDelta(Event):
    event = "text_delta"
    live = True
    text: str
    step: int


@dataclass(frozen=True)
class ToolStart(Event):
    event = "tool_start"
    live = True
    step: int
    name: str
    label: str
    tool_call_id: str = ""
    args: dict[str, Any] | None = None


@dataclass(frozen=True)
class PermissionAsked(Event):
    event = "permission_asked"
    tool: str
    what: str
    why: str
    answer: str


@dataclass(frozen=True)
class HookRan(Event):
    event = "hook"
    hook: str
    source: str
    exit_code: int | None
    elapsed_s: float
    decision: str
    where: str
    tool: str | None = absent_when_none()
    message: str | None = absent_when_none()
