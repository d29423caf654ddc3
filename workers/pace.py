"""How long a model's calls take, learnt from this run's own calls to it.

A call's time is mostly two things: reading the prompt tokens the server has not cached,
and writing the reply. On the bundled model on two cores the first is about 30 tokens a
second and the second about 8, so one batch of ten file reads (8,000 new tokens) costs a
reader four minutes before it writes a word. Knowing that, an agent can be shown only
what it has time to read, and asked for its answer while there is time to write it.
"""

from __future__ import annotations

import threading
from collections import deque

from workers.model import Message, ServerTimes
from workers.tools.base import CHARS_PER_TOKEN

PROMPT_COST_PRIOR = 0.25
"""A new prompt token's time as a share of a reply token's, where the calls cannot tell
the two apart: the bundled model on two cores reads a prompt token in a quarter of the
time it writes one (on a GPU far less; the estimate then errs long, which costs only
results held back from an agent with seconds left)."""
PROMPT_COST_FLOOR = 0.02
"""The least share a fit may give it: noise in a few calls must not make reading free."""
WELL_POSED = 0.05
"""How far from collinear the calls' prompt and reply sizes must be for a fit of two
rates (the least-squares matrix's determinant over the product of its diagonal)."""
MARGIN = 1.2
"""Longer prompts are read more slowly (attention grows with them): estimates err long."""
KEPT_CALLS = 24
RECENT_REPLIES = 8
RECENT_TIMED = 4
"""The calls a server's own timings are taken from, the latest: a token costs more as
the context grows, and a run's first calls (a 2,600-token prompt read at 14 ms a token)
say little of its later ones (30 tokens at 25 to 39 ms, replies at 110 ms where they
had been 100)."""
ANSWER_MARGIN = 1.4
"""How far an answer's cap errs short: a reply slows as it grows (the demo's, 8.0 tokens
a second at 400 against 9 at 40), and one the deadline cuts gives nothing. The demo's
explorer, capped with the calls' rates at MARGIN, wrote 395 tokens into 60 s and was cut."""
ANSWER_TOKENS = 256
"""The least an answer is taken to run to: a reply that calls tools is a few dozen tokens,
an answer to a survey a few hundred (the demo's reader's: 318, written in 54 s)."""


class Pace:
    """One model's calls: their times and token counts, and what a call should take.
    The agents of a run that call the same model share one (Budget.pace)."""

    def __init__(self) -> None:
        self._calls: deque[tuple[int, int, float]] = deque(maxlen=KEPT_CALLS)
        self._timed: deque[tuple[int, float, int, float]] = deque(maxlen=KEPT_CALLS)
        """(new prompt tokens, seconds reading them, reply tokens, seconds writing them),
        as the server said them."""
        self._replies: deque[int] = deque(maxlen=RECENT_REPLIES)
        self._times: deque[float] = deque(maxlen=RECENT_REPLIES)
        self._lock = threading.Lock()

    def took(
        self,
        seconds: float,
        new_prompt: int | None,
        completion: int | None,
        *,
        aside: bool = False,
        server: ServerTimes | None = None,
    ) -> None:
        """A call took `seconds`, reading `new_prompt` prompt tokens the server had not
        cached and writing `completion`; None where the endpoint did not say (a server
        that caches but does not say what: all of the prompt is not new). `server`: what
        the server says it spent, believed where it fits in the call's own time and
        writes no faster than MIN_SECONDS_A_TOKEN. An `aside` (a prompt of its own, such
        as a first answer from the map) times the model but says nothing of how long an
        agent's replies run, nor, its context short, of an agent's rates."""
        with self._lock:
            self._times.append(seconds)
            if server is not None and not aside and _believable(server, seconds):
                self._timed.append(
                    (
                        server.prompt_tokens,
                        server.prompt_seconds,
                        server.reply_tokens,
                        server.reply_seconds,
                    )
                )
            if completion is not None and completion > 0:
                self._calls.append((max(new_prompt or 0, 0), completion, seconds))
                if not aside:
                    self._replies.append(completion)

    def known(self) -> bool:
        """Whether any call was timed."""
        return bool(self._times)

    def measured(self) -> bool:
        """Whether a call reported its tokens: how long a result takes to read is known."""
        return bool(self._calls)

    def answer_seconds(self) -> float:
        """What writing an answer should take: ANSWER_TOKENS, or a reply as long as the
        longest recent one."""
        return max(self.seconds_for(0, ANSWER_TOKENS), self.seconds_for(0))

    def seconds_for(self, new_prompt: int, completion: int | None = None) -> float:
        """What a call reading `new_prompt` new tokens and writing `completion` (by
        default a reply as long as the longest recent one) should take. Where no call
        reported its tokens, the slowest recent call; 0.0 before any."""
        with self._lock:
            calls, times, replies = list(self._calls), list(self._times), list(self._replies)
            timed = list(self._timed)
        if not calls:
            return max(times, default=0.0)
        if completion is None:
            completion = max(replies or [c for _, c, _ in calls[-RECENT_REPLIES:]])
        per_prompt, per_reply = _said_rates(timed[-RECENT_TIMED:]) or _rates(calls)
        return MARGIN * (per_prompt * max(new_prompt, 0) + per_reply * completion)

    def reply_tokens_within(self, seconds: float, new_prompt: int = 0) -> int | None:
        """The longest reply a call reading `new_prompt` new tokens can write in
        `seconds`, at least MIN_REPLY_TOKENS; None where no call reported its tokens."""
        with self._lock:
            calls, timed = list(self._calls), list(self._timed)
        if not calls:
            return None
        per_prompt, per_reply = _said_rates(timed[-RECENT_TIMED:]) or _rates(calls)
        writing = seconds / ANSWER_MARGIN - per_prompt * max(new_prompt, 0)
        return max(MIN_REPLY_TOKENS, int(writing / max(per_reply, MIN_SECONDS_A_TOKEN)))


MIN_REPLY_TOKENS = 64
"""A reply cut shorter says too little to be worth the call."""
MIN_SECONDS_A_TOKEN = 1e-4
"""Ten thousand tokens a second: a server that says it wrote faster is not believed."""
SERVER_SLACK = 1.1
"""How far past a call's own time (its clock and the server's differ) what the server
says it spent may run and still be believed."""


def _believable(server: ServerTimes, seconds: float) -> bool:
    """What a server says of a call fits in the call's own time (a second's slack for a
    short one), and its writing is no faster than MIN_SECONDS_A_TOKEN a token."""
    spent = server.prompt_seconds + server.reply_seconds
    return (
        server.reply_tokens > 0
        and server.reply_seconds >= MIN_SECONDS_A_TOKEN * server.reply_tokens
        and 0 < spent <= SERVER_SLACK * seconds + 1.0
    )


def _said_rates(timed: list[tuple[int, float, int, float]]) -> tuple[float, float] | None:
    """Seconds per new prompt token and per reply token as the server said them, over
    its recent calls; None where it said none. A fit of wall times cannot tell a cold
    server's first call, or a prompt read deep in a long context, from a slow writer:
    on the demo, two calls of 18 and 37 reply tokens fitted 0.25 s a reply token where
    the server spends 0.1 at that context's length, and an answer asked with 78 s left
    was capped at 264 tokens (650 at the server's rate)."""
    written = sum(c for _, _, c, _ in timed)
    if written <= 0:
        return None
    per_reply = sum(s for _, _, _, s in timed) / written
    read = sum(p for p, _, _, _ in timed)
    per_prompt = sum(s for p, s, _, _ in timed if p) / read if read else 0.0
    if per_reply <= 0:
        return None
    return max(per_prompt, PROMPT_COST_FLOOR * per_reply), per_reply


def _rates(calls: list[tuple[int, int, float]]) -> tuple[float, float]:
    """Seconds per new prompt token and per reply token: least squares over the calls
    where their sizes tell the two apart, else one rate with the prompt's at the prior's
    share; the prompt's never under the floor's share."""
    pp = sum(p * p for p, _, _ in calls)
    pc = sum(p * c for p, c, _ in calls)
    cc = sum(c * c for _, c, _ in calls)
    ps = sum(p * s for p, _, s in calls)
    cs = sum(c * s for _, c, s in calls)
    det = pp * cc - pc * pc
    if pp > 0 and det > WELL_POSED * pp * cc:
        per_prompt, per_reply = (ps * cc - cs * pc) / det, (cs * pp - ps * pc) / det
        if per_prompt > 0 and per_reply > 0:
            return max(per_prompt, PROMPT_COST_FLOOR * per_reply), per_reply
    weighted = sum(c + PROMPT_COST_PRIOR * p for p, c, _ in calls)  # > 0: every c > 0
    per_reply = sum(s for _, _, s in calls) / weighted
    return PROMPT_COST_PRIOR * per_reply, per_reply


def new_tokens(messages: list[Message]) -> int:
    """About how many tokens the messages since the last reply add to the prompt: what
    the server reads before it writes (text content; a list of parts counts none)."""
    chars = 0
    for message in reversed(messages):
        if message.get("role") == "assistant":
            break
        chars += len(content) if isinstance(content := message.get("content"), str) else 0
    return chars // CHARS_PER_TOKEN
