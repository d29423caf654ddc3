"""The answer once the workers have reported, for an agent that works only through them.

A small model that leads through `delegate` alone (the dispatcher) splits the job well
in its first reply, then, shown its workers' reports, hands out the same tasks again:
on the bundled 1.5B model, the demo's survey went out five times over (15 workers, 443
s). Its job after a batch of reports is to answer from them. So once a batch in which workers ran has its results, the next
reply is the answer, tools off, every part of the task asked for; for a task that asks
for a change, once a batch has changed files (explorers sent first to find where leave
it free to send coders next). A reply that is a call all the same gets tools back (the
loop's rule for a paused agent), so a job that needs another round can still have one.
"""

from __future__ import annotations

from workers.aids.focused_write import asks_for_change
from workers.facts import Facts
from workers.hooks import Aid, View

ANSWER_FROM_REPORTS = (
    "Your workers have reported above. Tools are off for this reply: answer every part "
    "of the task now, from their reports, in the form the task asks for (numbered parts "
    "are answered by their numbers; otherwise plain sentences), naming the files and "
    "folders they found and saying what they could not find. The task was: {task}"
)


class AnswerFromReports(Aid):
    answer_now = ANSWER_FROM_REPORTS

    def __init__(self) -> None:
        self._seen = 0

    def before_first_step(self, view: View) -> None:
        self._seen = len(view.facts)  # a resumed run's earlier batches were answered

    def answer_next(self, view: View) -> bool:
        batch, self._seen = view.facts[self._seen :], len(view.facts)
        if not any(facts.worker is not None for facts in batch):
            return False
        # A job that asks for a change is not done by reports alone: after explorers
        # have found where, coders come next.
        return not asks_for_change(view.task) or any(_changed(facts) for facts in batch)


def _changed(facts: Facts) -> bool:
    return bool(facts.modified) or any(_changed(e) for e in facts.evidence)
