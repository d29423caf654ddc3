"""Rebuilding the top agent's conversation from a run log, to continue where it stopped.

The log holds every user message, every assistant turn (text and tool calls) and every
tool result in full, and each compaction's pinned state: enough to rebuild exactly what
the model saw. Calls that never got a result (the run was killed mid-call) are answered
as interrupted; a worker that was running is reported, never replayed, with what it
changed: the difference between the snapshot it started from and the workspace now.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from supervisor.run_changes import NoChanges, agent_changes
from workers.changes.snapshots import Store
from workers.log.reader import Line, lines_of, of_type, read_raw
from workers.log.schema import (
    AgentStart,
    CheckChosen,
    Compaction,
    DelegateEnd,
    DelegateStart,
    LlmCall,
    SessionStart,
    ToolCalled,
    UserMessage,
)
from workers.model import REASONING_KEY, Message

Record = dict[str, Any]
TOP_AGENT_ID = "supervisor"


@dataclass
class Rebuilt:
    messages: list[Message]
    """Without the system prompt: the resuming session writes a fresh one."""
    interrupted_workers: list[str] = field(default_factory=list)
    """`w3 (coder): task…` for each worker that started and never ended, and what it
    changed when that can be seen."""
    task: str = ""


MAX_CHAIN = 100
"""Runs a chain of `-c` goes back through at most: a log naming itself, or a loop of
planted logs, ends there."""


def rebuild_chain(path: Path, store: Store | None = None) -> Rebuilt:
    """The conversation of the run at `path` and of every run it went on from
    (`resumed_from`, in the same folder), oldest first: a third `-c` still has the
    first exchange."""
    chain: list[list[Record]] = []
    seen: set[str] = set()
    current: Path | None = path
    while current is not None and current.stem not in seen and len(chain) < MAX_CHAIN:
        seen.add(current.stem)
        records = read_raw(current)
        chain.append(records)
        start = next((event for _, event in of_type(lines_of(records), SessionStart)), None)
        earlier = start.resumed_from if start is not None else None
        found = path.parent / f"{earlier}.jsonl" if earlier else None
        current = found if found is not None and found.is_file() else None
    messages: list[Message] = []
    rebuilt = Rebuilt(messages=[])
    for records in reversed(chain):
        rebuilt = rebuild(records, store, earlier=messages)
        messages = rebuilt.messages
    return rebuilt


def rebuild(
    records: list[Record], store: Store | None = None, earlier: list[Message] | None = None
) -> Rebuilt:
    """The top agent's conversation; `store` shows what interrupted workers changed;
    `earlier`: the conversation of the run this one went on from."""
    messages: list[Message] = [{"role": "system", "content": ""}, *(earlier or [])]
    pending: dict[str, Message] = {}  # results of the current batch, put in call order
    order: list[str] = []
    starts: dict[str, tuple[Line, DelegateStart]] = {}
    ended: set[str] = set()

    def flush() -> None:
        for call_id in order:
            if call_id in pending:
                messages.append(pending.pop(call_id))
        order.clear()

    for line in lines_of(records):
        match line.event:
            case DelegateStart(child_id=child):
                starts[child] = (line, line.event)
            case DelegateEnd(child_id=child):
                ended.add(child)
        if line.agent_id != TOP_AGENT_ID:
            continue
        match line.event:
            case UserMessage(content=content):
                flush()
                messages.append({"role": "user", "content": content})
            case LlmCall(aside=None | False) as call:
                flush()
                messages.append(_assistant(call))
                order[:] = [c["id"] for c in _whole(call.calls)]
            case ToolCalled(tool_call_id=call_id) as tool:
                pending[call_id] = {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "content": tool.content or tool.result_preview,  # format 1 kept a preview
                }
            case Compaction(messages_folded=folded, state=state):
                flush()
                messages[1 : 1 + folded] = [{"role": "user", "content": state}]
    flush()
    interrupted, changed = [], []
    for child, (line, start) in starts.items():
        if child in ended or line.agent_id != TOP_AGENT_ID:
            continue
        said = f"{child} ({start.child_profile}): {start.task}"
        labels = _changed_by(child, records, store) if store is not None else []
        if labels:
            said += f"; changed since it started: {', '.join(labels)}"
            changed.append(f"{child}: {', '.join(labels)}")
        interrupted.append(said)
    _answer_interrupted(messages, changed)
    task = next((str(m["content"]) for m in messages if m["role"] == "user"), "")
    return Rebuilt(messages=messages[1:], interrupted_workers=interrupted, task=task)


def _assistant(call: LlmCall) -> Message:
    """The assistant turn a model call gave, as the model saw it."""
    message: Message = {"role": "assistant", "content": call.text or None}
    if call.reasoning:
        message[REASONING_KEY] = list(call.reasoning)
    if calls := _whole(call.calls):
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in calls
        ]
    return message


def _whole(calls: list[dict[str, str]]) -> list[dict[str, str]]:
    """The calls of a model call's line that say their id, name and arguments."""
    return [c for c in calls if {"id", "name", "arguments"} <= c.keys()]


def _changed_by(agent: str, records: list[Record], store: Store) -> list[str]:
    """What an agent changed, as `gaffer diff --agent` reads it; [] when it could change
    nothing or its starting snapshot is gone."""
    try:
        found = agent_changes(records, store, agent).chosen
    except (NoChanges, OSError):
        return []
    return [change.label for part in found for change in part.changes]


def _answer_interrupted(messages: list[Message], changed: list[str]) -> None:
    """Give every call a result, in call order; the missing ones say they were interrupted."""
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        calls = (message.get("tool_calls") or []) if message["role"] == "assistant" else []
        if not calls:
            continue
        end = index
        while end < len(messages) and messages[end]["role"] == "tool":
            end += 1
        results = {m["tool_call_id"]: m for m in messages[index:end]}
        messages[index:end] = [results.get(c["id"]) or _interrupted(c, changed) for c in calls]
        index += len(calls)


def _interrupted(call: dict[str, Any], changed: list[str]) -> Message:
    if call["function"]["name"] == "delegate":
        text = (
            "interrupted: the run stopped while this worker was working; its work is not "
            "replayed. Files it changed may be half-done: check before relying on them."
        )
        if changed:
            text += " What the workers that never ended changed, as gaffer sees it: " + "; ".join(
                changed
            )
    else:
        text = "interrupted: the run stopped before this call finished; it was not run again."
    return {"role": "tool", "tool_call_id": call["id"], "content": text}


def first_baseline(records: list[Record]) -> str | None:
    """The snapshot a run's check puts kept files back to: the one its `check_chosen` line
    names (a resumed run's names its first run's), else the one its top agent started
    from; None when it logged neither."""
    for _, chosen in of_type(lines_of(records), CheckChosen):
        if chosen.baseline:
            return chosen.baseline
    for line, started in of_type(lines_of(records), AgentStart):
        if line.parent_id is None and started.snapshot:
            return started.snapshot
    return None
