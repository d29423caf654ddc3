"""The change tracker credits an agent with its own steps only (workers/changes/tracker.py):
its calls, and gaffer's own writes for it between a `mark` and a `look`; never what the
user changed in between, whichever aid looks next."""

from __future__ import annotations

from pathlib import Path

from workers.changes.snapshots import Store
from workers.changes.tracker import ChangeTracker


def test_an_aid_s_write_after_a_mark_credits_only_its_own(workspace: Path) -> None:
    (workspace / "a.py").write_text("a0\n")
    (workspace / "b.py").write_text("b0\n")
    tracker = ChangeTracker(Store(workspace))
    tracker.call_starts()
    (workspace / "a.py").write_text("a1\n")  # the agent's call
    tracker.changed_by_call()
    (workspace / "b.py").write_text("the user's\n")  # another terminal, between calls
    passed = tracker.steps_taken()
    tracker.mark()  # an aid is about to write for the agent
    (workspace / "c.py").write_text("a sample\n")
    tracker.look()
    _, changes = tracker.finish()
    assert [c.path for c in changes] == ["a.py", "c.py"]
    assert [c.path for c in tracker.changes_since(passed)] == ["c.py"]
