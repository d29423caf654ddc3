"""`gaffer view`: the timeline page of a run, from its log alone, checked in a real
headless Chromium (Debian's chromium and chromium-driver): a parallel survey, a serial
two-coder run with a retry and a compaction, and a run killed with -9."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from supervisor.runlog import read_records
from supervisor.timeline import Timeline, build
from supervisor.timeline_page import render
from tests.conftest import must_run_here
from tests.fake_openai import FakeOpenAI, Reply, error_reply
from tests.helpers import add_host_coder, gaffer, gaffer_replying, kill_9_mid_run

SAMPLES = Path(__file__).parent.parent / "logs" / "samples"
SURVEY = SAMPLES / "demo-parallel-survey-local-model.jsonl"
# Where each page's screenshot is kept, to look at (and where README's comes from).
ARTIFACTS = os.environ.get("GAFFER_TEST_ARTIFACTS")


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
    assert any(b.open and b.kind == "model" for b in timeline.bars)


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


def test_gaffer_view_serve_answers_on_loopback(tmp_path: Path) -> None:
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    from tests.helpers import cli_env

    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(SURVEY, logs / SURVEY.name)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "view", "last", "--serve"],
        cwd=workspace,
        env=cli_env(workspace, None, None),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        process.stdout.readline()  # the page's path
        url = process.stdout.readline().split()[2]
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url, timeout=10) as response:
            assert b"timeline-data" in response.read()
        # A rebound name (evil.example resolving to 127.0.0.1) is refused.
        rebound = urllib.request.Request(url, headers={"Host": "evil.example"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(rebound, timeout=10)
        assert refused.value.code == 421
    finally:
        process.terminate()
        process.wait(timeout=10)


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
