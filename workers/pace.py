"""How long the endpoint takes for a call, learnt from this run's own calls.

A call's time is mostly two things: reading the prompt tokens the server has not cached,
and writing the reply. On the bundled model on two cores the first is about 50 tokens a
second and the second about 8, so one batch of ten file reads (8,000 new tokens) costs a
reader three minutes before it writes a word. Knowing that, an agent can be shown only
what it has time to read, and asked for its answer while there is time to write it.
"""

from __future__ import annotations

import threading
from collections import deque

PROMPT_COST_PRIOR = 0.15
"""A new prompt token's time as a share of a reply token's, until calls that read long
prompts have been measured: on a CPU prompts are read 6 to 10 times faster than
replies are written (on a GPU far faster, which the calls soon show)."""
MEASURED_PROMPT = 1000
"""New prompt tokens a call read for the fit to trust its prompt rate over the prior."""
MARGIN = 1.2
"""Longer prompts are read more slowly (attention grows with them): estimates err long."""
KEPT_CALLS = 24


class Pace:
    """The calls' times and token counts, and what a call of a given size should take.
    One is shared by every agent of a run (the same endpoint, as a rule), so a worker's
    first step is judged by what its caller's calls took."""

    def __init__(self) -> None:
        self._calls: deque[tuple[int, int, float]] = deque(maxlen=KEPT_CALLS)
        self._slowest = 0.0
        self._lock = threading.Lock()

    def took(self, seconds: float, new_prompt: int = 0, completion: int = 0) -> None:
        """A call took `seconds`, reading `new_prompt` uncached prompt tokens and writing
        `completion` tokens (0 and 0 where the endpoint reported none)."""
        with self._lock:
            self._slowest = max(self._slowest, seconds)
            if new_prompt > 0 or completion > 0:
                self._calls.append((max(new_prompt, 0), max(completion, 0), seconds))

    def known(self) -> bool:
        return self._slowest > 0

    def usual_reply(self) -> int:
        """Tokens a reply runs to: the longest of the measured ones."""
        with self._lock:
            return max((c for _, c, _ in self._calls), default=0)

    def seconds_for(self, new_prompt: int, completion: int | None = None) -> float:
        """What a call reading `new_prompt` new tokens and writing `completion` (by
        default the usual reply) should take; the slowest call so far where no call
        reported its tokens, and 0.0 before any call."""
        with self._lock:
            calls, slowest = list(self._calls), self._slowest
        if not calls:
            return slowest
        completion = max((c for _, c, _ in calls), default=0) if completion is None else completion
        per_prompt, per_reply = _rates(calls)
        return MARGIN * (per_prompt * new_prompt + per_reply * completion)


def _rates(calls: list[tuple[int, int, float]]) -> tuple[float, float]:
    """Seconds per new prompt token and per reply token: least squares over the calls,
    both kept positive, the prompt's from the prior until a long prompt was measured."""
    pp = sum(p * p for p, _, _ in calls)
    pc = sum(p * c for p, c, _ in calls)
    cc = sum(c * c for _, c, _ in calls)
    ps = sum(p * s for p, _, s in calls)
    cs = sum(c * s for _, c, s in calls)
    det = pp * cc - pc * pc
    if det > 1e-6 * pp * cc > 0:
        per_prompt, per_reply = (ps * cc - cs * pc) / det, (cs * pp - ps * pc) / det
        if per_prompt > 0 and per_reply > 0:
            if max(p for p, _, _ in calls) < MEASURED_PROMPT:
                per_prompt = max(per_prompt, PROMPT_COST_PRIOR * per_reply)
            return per_prompt, per_reply
    # Too few or too alike to tell apart: one rate, prompt tokens at the prior's share.
    weighted = sum(c + PROMPT_COST_PRIOR * p for p, c, _ in calls)
    per_reply = sum(s for _, _, s in calls) / weighted if weighted else 0.0
    return PROMPT_COST_PRIOR * per_reply, per_reply
