"""What every benchmark returns: named ratios and figures measured in one run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    name: str
    value: float
    unit: str
    target: str = ""
    ok: bool | None = None
    """None when the row has no target to meet."""
