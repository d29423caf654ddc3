"""Approval modes (`--mode`): what is asked about when no rule says.

| gaffer      | asks before                                   | Claude Code       | Codex CLI        |
|-------------|-----------------------------------------------|-------------------|------------------|
| `ask-edits` | every edit (with its diff), and every command  | `default`         | `suggest`        |
|             | that is not read-only, host or container      |                   |                  |
| `auto`      | host commands outside the read-only allowlist | `acceptEdits`     | `auto-edit`      |
| `plan`      | nothing: only read-only tools run; the answer | `plan`            | `--sandbox       |
|             | is a plan                                     |                   | read-only`       |
| `full-auto` | nothing (workers stay in their containers)    | (no sandbox kept) | `full-auto`      |

Rules hold in every mode: a deny is a deny, and an ask rule asks even in `full-auto`.
"""

from __future__ import annotations

from typing import Literal

Mode = Literal["ask-edits", "plan", "auto", "full-auto"]
MODES: tuple[Mode, ...] = ("ask-edits", "plan", "auto", "full-auto")
EDITS = frozenset({"write_file", "edit_file"})
"""The tools that edit a file in place; a command's edits are asked about as commands."""
PLAN_NOTE = (
    "Plan mode: nothing may be changed in this run. Read what you need, then answer with "
    "a plan: the steps, the files each touches, and how the result will be checked."
)
