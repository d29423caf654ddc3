"""`gaffer view`: the timeline page of a run, from its log alone, checked in a real
headless Chromium (Debian's chromium and chromium-driver): a parallel survey, a serial
two-coder run with a retry and a compaction, a run killed with -9, and two isolated
coders whose changes conflict, under a hostile answer; the outcome is shown first."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from supervisor.runlog import read_records
from supervisor.timeline import Timeline, build
from supervisor.timeline_outcome import UNVERIFIED
from supervisor.timeline_page import render
from tests.conftest import must_run_here
from tests.fake_openai import FakeOpenAI, Reply, error_reply
from tests.helpers import add_host_coder, gaffer, gaffer_replying, kill_9_mid_run

SAMPLES = Path(__file__).parent.parent / "logs" / "samples"
SURVEY = SAMPLES / "demo-parallel-survey-local-model.jsonl"
# Where each page's screenshot is kept, to look at (and where README's comes from).
ARTIFACTS = os.environ.get("GAFFER_TEST_ARTIFACTS")
HOSTILE = "<img src=x onerror=alert(1)>"
RED, GREEN = "rgba(224, 49, 49, 1)", "rgba(47, 158, 68, 1)"  # as Selenium reads a colour


def delegate(profile: str, task: str) -> tuple[str, str]:
    return ("delegate", json.dumps({"profile": profile, "task": task}))


def write(path: str, content: str) -> Reply:
    return Reply(tool_calls=[("write_file", json.dumps({"path": path, "content": content}))])


@pytest.fixture(scope="module")
def two_coders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A supervisor hands two edits to two host coders, one after the other; the first
    coder's endpoint fails once (a retry); the supervisor's prompt is reported near the
    window, so it compacts its first turn away before its last step."""
    workspace = tmp_path_factory.mktemp("coders") / "ws"
    workspace.mkdir()
    add_host_coder(workspace)
    replies = [
        Reply(tool_calls=[delegate("hostcoder", "write a.txt")]),
        Reply(tool_calls=[delegate("hostcoder", "write b.txt")], prompt_tokens=26_500),
        Reply(text="Summary: a.txt was written by a coder; b.txt is being written."),
        Reply(text="Both files are written."),
    ]
    routes = {
        "write a.txt": [error_reply(503, "busy"), write("a.txt", "a\n"), Reply(text="Wrote a.")],
        "write b.txt": [write("b.txt", "b\n"), Reply(text="Wrote b.")],
    }
    done, _ = gaffer_replying(
        workspace,
        "run",
        "--no-verify",
        "--context-window",
        "32768",
        "two files",
        replies=replies,
        routes=routes,
    )
    assert done.returncode == 0, done.stderr
    [log] = sorted((workspace.parent / "logs").glob("*.jsonl"))
    return log


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workspace = tmp_path_factory.mktemp("killed") / "ws"
    workspace.mkdir()
    replies = [
        Reply(tool_calls=[delegate("explorer", "look around")]),
        Reply(tool_calls=[("list_dir", json.dumps({"path": "."}))]),
        Reply(text="never sent", delay=30),
    ]
    with FakeOpenAI(replies) as server:
        kill_9_mid_run(workspace, server, "look", requests=3)
    [log] = sorted((workspace.parent / "logs").glob("*.jsonl"))
    return log


@pytest.fixture(scope="module")
def conflicted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`gaffer run --isolate`: two host coders rewrite line 5 of shared.py at once, the
    second a second later, so its change conflicts with the first's and is not applied;
    the supervisor's answer is hostile HTML, accepted unverified (no test ran)."""
    workspace = tmp_path_factory.mktemp("conflict") / "ws"
    workspace.mkdir()
    original = "".join(f"line {n}\n" for n in range(1, 11))
    (workspace / "shared.py").write_text(original)
    add_host_coder(workspace)
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "start"]):
        subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
                       cwd=workspace, check=True, capture_output=True)  # fmt: skip
    # Both have their copies before either reads; the second ends a second later.
    read = Reply(tool_calls=[("read_file", json.dumps({"path": "shared.py"}))], delay=0.5)
    slow_read = Reply(tool_calls=read.tool_calls, delay=1.5)
    # Each answer after an edit is sent back twice for a test run, then let through.
    answers = [Reply(text=f"Done. {HOSTILE}")] * 3
    routes = {
        "edit first": [read, write("shared.py", original.replace("line 5", "line five")), *answers],
        "edit second": [slow_read, write("shared.py", original.replace("line 5", "5th")), *answers],
    }
    replies = [
        Reply(
            tool_calls=[delegate("hostcoder", "edit first"), delegate("hostcoder", "edit second")]
        ),
        *answers,
    ]
    done, _ = gaffer_replying(workspace, "run", "--isolate", "edit shared.py", replies=replies,
                              routes=routes)  # fmt: skip
    assert done.returncode == 3, done.stderr  # answered, but a change was not applied
    [log] = sorted((workspace.parent / "logs").glob("*.jsonl"))
    return log


@pytest.fixture(scope="module")
def failed_worker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The supervisor's one explorer is refused by its endpoint (400) and fails; the
    supervisor answers all the same: the run exits 3."""
    workspace = tmp_path_factory.mktemp("failed") / "ws"
    workspace.mkdir()
    replies = [
        Reply(tool_calls=[delegate("explorer", "look around")]),
        Reply(text="The worker could not look."),
    ]
    routes = {"look around": [error_reply(400, "this model cannot do that")]}
    done, _ = gaffer_replying(workspace, "run", "survey it", replies=replies, routes=routes)
    assert done.returncode == 3, done.stderr
    [log] = sorted((workspace.parent / "logs").glob("*.jsonl"))
    return log


def timeline_of(log: Path) -> Timeline:
    return build(read_records(log), log)


def bars(timeline: Timeline, agent: str, kind: str) -> list[Any]:
    return [b for b in timeline.bars if b.agent == agent and b.kind == kind]


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def span(timeline: Timeline, agent: str) -> tuple[float, float]:
    lane = next(lane for lane in timeline.lanes if lane.agent == agent)
    return lane.start, lane.end


# -- the timeline, from the log -------------------------------------------------------


def test_a_parallel_survey_has_overlapping_explorers() -> None:
    timeline = timeline_of(SURVEY)
    assert [lane.agent for lane in timeline.lanes] == ["supervisor", "w1", "w2"]
    assert overlap(span(timeline, "w1"), span(timeline, "w2"))
    assert len(bars(timeline, "supervisor", "model")) == 2
    assert [len(bars(timeline, w, "model")) for w in ("w1", "w2")] == [2, 2]
    delegates = [b for b in bars(timeline, "supervisor", "tool") if b.child]
    assert {b.child for b in delegates} == {"w1", "w2"}
    assert timeline.critical and timeline.critical[0] == bars(timeline, "supervisor", "model")[0].id


def test_two_coders_take_turns_and_the_retry_and_compaction_show(two_coders: Path) -> None:
    timeline = timeline_of(two_coders)
    assert [lane.agent for lane in timeline.lanes] == ["supervisor", "w1", "w2"]
    assert not overlap(span(timeline, "w1"), span(timeline, "w2"))
    assert len(bars(timeline, "w1", "retry")) == 1
    assert len(bars(timeline, "supervisor", "compaction")) == 1
    assert bars(timeline, "w2", "wait"), "w2 waited for the workspace while w1 edited"
    assert [t["tool"] for t in timeline.tools][:1] == ["delegate"]


def test_a_killed_run_shows_its_open_bars_as_interrupted(killed: Path) -> None:
    timeline = timeline_of(killed)
    assert timeline.status == "interrupted"
    assert all(lane.status == "interrupted" for lane in timeline.lanes)
    assert (timeline.outcome.kind, timeline.outcome.tone) == ("interrupted", "amber")
    assert [(t.agent, t.what, t.tone) for t in timeline.outcome.troubles] == [
        ("w1", "interrupted", "amber")
    ]
    assert any(b.open and b.kind == "model" for b in timeline.bars)


def merged(log: Path) -> tuple[str, str]:
    """The conflicted run's workers: the one whose change landed, and the one whose did not."""
    merges = {r["agent_id"]: r["status"] for r in read_records(log) if r["event"] == "merge"}
    assert sorted(merges.values()) == ["applied", "conflict"]
    return next(a for a, s in merges.items() if s == "applied"), next(
        a for a, s in merges.items() if s == "conflict"
    )


def test_the_outcome_of_a_conflicted_run_names_the_worker_and_its_files(conflicted: Path) -> None:
    timeline = timeline_of(conflicted)
    landed, lost = merged(conflicted)
    outcome = timeline.outcome
    assert (outcome.kind, outcome.tone) == ("incomplete", "amber"), "it exited 3: never completed"
    assert outcome.meaning == "the answer came, but something it started did not hold (exit 3)"
    assert outcome.answer.startswith(f"Done. {HOSTILE}")
    assert (outcome.verdict.verdict, outcome.verdict.tone) == ("unverified", "amber")
    assert "no test ran" in outcome.verdict.reason
    assert outcome.files == [{"path": "shared.py", "change": "modified", "by": landed}]
    [trouble] = outcome.troubles
    assert (trouble.agent, trouble.what, trouble.tone) == (lost, "conflict", "red")
    assert [c["path"] for c in trouble.conflicts] == ["shared.py"]
    assert "same lines" in trouble.conflicts[0]["why"]
    lanes = {lane.agent: lane for lane in timeline.lanes}
    assert (lanes[lost].status, lanes[lost].merge) == ("completed", "conflict")
    assert lanes[landed].merge == "applied"
    # Had the second change come in, the answer went out unverified: exit 0, or 4.
    records = [r for r in read_records(conflicted) if r.get("status") != "conflict"]
    for record in records:  # as the run would have ended then
        if record["event"] == "session_end":
            record.update(status="completed", exit_code=0, reason="finished")
    assert build(records).outcome.meaning == UNVERIFIED


def page_data(page: str) -> dict[str, Any]:
    embedded = re.search(r'id="timeline-data">(.*?)</script>', page, re.DOTALL)
    assert embedded is not None
    return dict(json.loads(embedded.group(1)))


def test_a_failed_worker_and_one_stopped_by_a_limit_are_the_outcome(tmp_path: Path) -> None:
    records = read_records(SURVEY)
    for record in records:
        if record["event"] == "agent_end" and record["agent_id"] == "w1":
            record.update(status="failed", reason="the endpoint refused the key", answer=None)
        if record["event"] == "agent_end" and record["agent_id"] == "w2":
            record.update(status="limit", reason="steps limit: 3 steps")
        if record["event"] == "session_end":
            record.update(status="failed", reason="the endpoint refused the key")
    data = page_data(render(build(records)))
    outcome = data["outcome"]
    assert (outcome["kind"], outcome["tone"]) == ("failed", "red")
    assert "exit 1" in outcome["meaning"] and outcome["reason"] == "the endpoint refused the key"
    assert [(t["agent"], t["what"], t["tone"]) for t in outcome["troubles"]] == [
        ("w1", "failed", "red"),
        ("w2", "limit", "amber"),
    ]
    assert outcome["troubles"][0]["reason"] == "the endpoint refused the key"
    assert outcome["verdict"]["verdict"] == "unchecked" and outcome["files"] == []
    assert {lane["agent"]: lane["status"] for lane in data["lanes"]} == {
        "supervisor": "limit",  # the sample's own: the step limit made it summarise
        "w1": "failed",
        "w2": "limit",
    }


def test_a_change_not_applied_is_amber_whatever_the_worker_said() -> None:
    records = read_records(SURVEY)
    end = next(
        i for i, r in enumerate(records) if r["event"] == "agent_end" and r["agent_id"] == "w2"
    )
    who = {k: records[end][k] for k in ("ts", "session_id", "agent_id", "parent_id", "profile")}
    skipped = {**who, "event": "merge", "status": "skipped", "files": [], "conflicts": []}
    records.insert(end + 1, skipped)
    timeline = build(records)
    [trouble] = timeline.outcome.troubles
    assert (trouble.agent, trouble.what, trouble.tone) == ("w2", "skipped", "amber")
    assert "not applied" in trouble.reason
    lane = next(lane for lane in timeline.lanes if lane.agent == "w2")
    assert (lane.status, lane.merge) == ("completed", "skipped")


def test_hostile_log_text_cannot_break_out_of_the_page(tmp_path: Path) -> None:
    records = read_records(SURVEY)
    for record in records:
        if record["event"] == "tool_call":
            record["content"] = "</script><script>document.title='owned'</script><img src=x>"
    page = render(build(records))
    assert "</script><script>document.title" not in page
    assert page.count("</script>") == 2  # the data's and the code's own


def test_gaffer_view_writes_the_page_beside_the_log(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(SURVEY, logs / SURVEY.name)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    done = gaffer(workspace, "view", "last")
    assert done.returncode == 0, done.stderr
    page = Path(done.stdout.strip())
    assert page == logs / SURVEY.with_suffix(".html").name and page.read_text().startswith(
        "<!doctype html>"
    )
    missing = gaffer(workspace, "view", "nosuchrun")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1


# -- the page, in a real browser ------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        must_run_here("no chromium and chromium-driver here (Debian's packages)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,900",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def open_page(browser: Any, log: Path, tmp_path: Path) -> Timeline:
    timeline = timeline_of(log)
    page = tmp_path / f"{log.stem}.html"
    page.write_text(render(timeline))
    browser.get(page.as_uri())
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    return timeline


def lane_bars(browser: Any, agent: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return browser.find_elements(By.CSS_SELECTOR, f'.lane[data-agent="{agent}"] .bar')


def screenshot(browser: Any, tmp_path: Path, name: str) -> None:
    shot = tmp_path / f"{name}.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    if ARTIFACTS:
        Path(ARTIFACTS).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(ARTIFACTS) / shot.name)


@pytest.mark.parametrize("which", ["survey", "two_coders", "killed"])
def test_the_page_in_chromium(
    which: str, browser: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from selenium.webdriver.common.by import By

    log = SURVEY if which == "survey" else request.getfixturevalue(which)
    timeline = open_page(browser, log, tmp_path)
    assert browser.find_element(By.ID, "outcome").is_displayed()
    lanes = browser.find_elements(By.CSS_SELECTOR, ".lane")
    assert [lane.get_attribute("data-agent") for lane in lanes] == [
        lane.agent for lane in timeline.lanes
    ]
    for lane in timeline.lanes:
        assert len(lane_bars(browser, lane.agent)) == len(
            [b for b in timeline.bars if b.agent == lane.agent]
        )
    if which != "killed":
        tool = next(b for b in timeline.bars if b.kind == "tool" and b.child is None)
        browser.find_element(By.CSS_SELECTOR, f'[data-bar="{tool.id}"]').click()
        panel = browser.find_element(By.ID, "panel").text
        assert tool.label in panel and tool.detail["result"].splitlines()[0][:40] in panel
    if which == "two_coders":  # the explorers' bars overlap on screen; the coders' do not
        first, second = (
            browser.find_element(By.CSS_SELECTOR, f'.lane[data-agent="{w}"] .kind-model')
            for w in ("w1", "w2")
        )
        assert first.rect["x"] + first.rect["width"] <= second.rect["x"] + 1
    if which == "survey":
        first, second = (
            browser.find_element(By.CSS_SELECTOR, f'.lane[data-agent="{w}"] .kind-model')
            for w in ("w1", "w2")
        )
        assert abs(first.rect["x"] - second.rect["x"]) < first.rect["width"]
    screenshot(browser, tmp_path, f"timeline-{which}")


def test_the_outcome_comes_first_in_chromium_and_the_conflict_is_red(
    conflicted: Path, browser: Any, tmp_path: Path
) -> None:
    """Without a click: the run's end, the answer (hostile HTML, as text), the verdict,
    the files changed, and the worker whose change conflicted, red, with its file."""
    from selenium.webdriver.common.by import By

    landed, lost = merged(conflicted)
    open_page(browser, conflicted, tmp_path)
    outcome = browser.find_element(By.ID, "outcome")
    chart = browser.find_element(By.ID, "chart")
    assert outcome.is_displayed() and outcome.rect["y"] + outcome.rect["height"] <= chart.rect["y"]
    assert outcome.rect["y"] < browser.execute_script("return window.innerHeight")
    text = outcome.text
    assert text.startswith("incomplete") and "exit 3" in text and "completed" not in text
    answer = outcome.find_element(By.CSS_SELECTOR, "pre.answer")
    assert answer.text.startswith(f"Done. {HOSTILE}")
    assert answer.value_of_css_property("overflow-y") == "auto"  # a long answer scrolls
    assert browser.find_elements(By.TAG_NAME, "img") == []
    assert "unverified" in text and "no test ran after the last edit" in text
    files = outcome.find_element(By.CSS_SELECTOR, "ul.files").text
    assert "shared.py" in files and "modified" in files and landed in files
    trouble = outcome.find_element(By.CSS_SELECTOR, f'li.trouble[data-agent="{lost}"]')
    assert "conflict" in trouble.text and "shared.py" in trouble.text
    assert trouble.value_of_css_property("border-left-color") == RED
    assert outcome.find_elements(By.CSS_SELECTOR, f'li.trouble[data-agent="{landed}"]') == []
    # The lane of the worker whose change did not come in is red, not green.
    lane = browser.find_element(By.CSS_SELECTOR, f'.lane[data-agent="{lost}"]')
    assert "merge-conflict" in (lane.get_attribute("class") or "").split()
    name = lane.find_element(By.CSS_SELECTOR, ".name")
    assert name.value_of_css_property("border-left-color") == RED
    landed_name = browser.find_element(By.CSS_SELECTOR, f'.lane[data-agent="{landed}"] .name')
    assert landed_name.value_of_css_property("border-left-color") == GREEN
    screenshot(browser, tmp_path, "timeline-conflict")


def test_a_failed_worker_has_a_red_lane_and_the_run_says_its_exit_on_load(
    failed_worker: Path, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    timeline = open_page(browser, failed_worker, tmp_path)
    assert {lane.agent: lane.status for lane in timeline.lanes} == {
        "supervisor": "completed",
        "w1": "failed",
    }
    text = browser.find_element(By.ID, "outcome").text
    assert text.startswith("incomplete") and "(exit 3)" in text and "exit 0" not in text
    assert "w1 (explorer)" in text
    name = browser.find_element(By.CSS_SELECTOR, '.lane[data-agent="w1"] .name')
    assert name.value_of_css_property("border-left-color") == RED
    screenshot(browser, tmp_path, "timeline-failed-worker")
    # one that failed before it started (no line of its own) has its lane all the same
    records = [r for r in read_records(failed_worker) if r.get("agent_id") != "w1"]
    [lane] = [lane for lane in build(records).lanes if lane.agent == "w1"]
    assert (lane.status, lane.profile, lane.parent) == ("failed", "explorer", "supervisor")


def test_a_planted_log_cannot_make_the_page_read_other_files(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's secret\n")
    log = tmp_path / "logs" / "20260101-000000-aaaaaa.jsonl"
    log.parent.mkdir()
    records = read_records(SURVEY)
    for diff_file in (
        "../secret.txt",
        "/etc/passwd",
        "20260101-000000-aaaaaa.changes/../../secret.txt",
    ):
        planted = {**records[-1], "event": "change_set", "agent_id": "w1", "diff_file": diff_file}
        timeline = build([*records, planted], log)
        assert "the user's secret" not in json.dumps(timeline.as_json())
    changes = log.with_suffix(".changes")
    changes.mkdir()
    (changes / "w1.diff").symlink_to(secret)  # a link beside the log is not followed either
    planted = {
        **records[-1],
        "event": "change_set",
        "agent_id": "w1",
        "diff_file": f"{changes.name}/w1.diff",
    }
    assert "the user's secret" not in json.dumps(build([*records, planted], log).as_json())


def test_fresh_attempts_and_joins_are_marked_on_their_lane() -> None:
    records = read_records(SURVEY)
    end = next(i for i, r in enumerate(records) if r["event"] == "session_end")
    last = records[end - 1]
    sample = {**last, "event": "fresh_attempt", "agent_id": "supervisor", "attempt": 2}
    sample.update(temperature=1.0, files=["rle.py"], command="pytest", exit_code=1)
    sample.update(kept=False, reason="the tests failed (exit 1); taken back")
    joined = {**sample, "kept": True, "reason": "the tests pass", "made_from": [2, 1]}
    records[end:end] = [sample, joined]
    marks = [b for b in build(records).bars if b.label.startswith(("fresh", "join"))]
    assert [(b.label, b.error) for b in marks] == [
        ("fresh attempt 2: taken back", True),
        ("join of samples 2 and 1: kept", False),
    ]
