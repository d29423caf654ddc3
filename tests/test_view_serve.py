"""`gaffer view --serve` shows a run's page, file contents and all, to whoever was shown
its URL and to no one else: it listens on loopback only, and a request without the URL's
token gets nothing, whichever local user asks."""

from __future__ import annotations

import http.client
import os
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import must_run_here
from tests.helpers import cli_env

SURVEY = (
    Path(__file__).parent.parent / "logs" / "samples" / "demo-parallel-survey-local-model.jsonl"
)
OTHER_UID = 1000


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`gaffer view --serve` of a real run's log: the process, and the URL it printed."""
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
        yield process, process.stdout.readline().split()[2]
    finally:
        process.terminate()
        process.wait(timeout=10)


def get(url: str, path: str) -> tuple[int, bytes]:
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def become_other_user() -> None:
    os.setgroups([])
    os.setgid(OTHER_UID)
    os.setuid(OTHER_UID)


def test_only_the_printed_url_gets_the_page(served: tuple[subprocess.Popen[str], str]) -> None:
    _, url = served
    token = urllib.parse.urlsplit(url).path.strip("/")
    assert len(token) >= 32
    status, page = get(url, urllib.parse.urlsplit(url).path)
    assert status == 200 and b"timeline-data" in page
    assert get(url, f"/{token}?view=1")[0] == 200
    for path in ("/", "/index.html", f"/{token[:-1]}/", f"/{token}x", f"/?token={token[:8]}"):
        assert get(url, path) == (404, b""), path


def test_it_listens_on_loopback_alone(served: tuple[subprocess.Popen[str], str]) -> None:
    _, url = served
    port = urllib.parse.urlsplit(url).port
    assert url.startswith("http://127.0.0.1:") and port
    listening = [
        fields[1].split(":")[0]
        for table in ("/proc/net/tcp", "/proc/net/tcp6")
        if os.path.exists(table)
        for fields in (line.split() for line in Path(table).read_text().splitlines()[1:])
        if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == port
    ]
    assert listening == ["0100007F"], "127.0.0.1 in /proc/net/tcp's byte order"


def test_another_user_gets_nothing_and_cannot_learn_the_token(
    served: tuple[subprocess.Popen[str], str],
) -> None:
    process, url = served
    token = urllib.parse.urlsplit(url).path.strip("/")
    # What every user may read of another's process: its command line.
    assert token not in Path(f"/proc/{process.pid}/cmdline").read_text()
    if os.geteuid() != 0:
        must_run_here("switching to another uid needs root; the token test above stands")
    parts = urllib.parse.urlsplit(url)

    def as_other_user(path: str) -> tuple[str, bytes]:
        """The status line and body another uid gets (bash's /dev/tcp: no interpreter of
        ours that uid could run)."""
        ask = (
            f"exec 3<>/dev/tcp/127.0.0.1/{parts.port}; "
            f"printf 'GET {path} HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\n\\r\\n' >&3; cat <&3"
        )
        done = subprocess.run(
            ["bash", "-c", ask],
            preexec_fn=become_other_user,
            capture_output=True,
            timeout=30,
            check=True,
        )
        head, _, body = done.stdout.partition(b"\r\n\r\n")
        return head.decode().splitlines()[0], body

    for path in ("/", "/index.html"):
        status, body = as_other_user(path)
        assert " 404 " in status and body == b"", path
    status, body = as_other_user(parts.path)
    assert " 200 " in status and b"timeline-data" in body, "with the URL, any user gets it"


def test_it_answers_on_loopback_and_refuses_a_rebound_name(
    served: tuple[subprocess.Popen[str], str],
) -> None:
    import urllib.error
    import urllib.request

    _, url = served
    assert url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(url, timeout=10) as response:
        assert b"timeline-data" in response.read()
    # A rebound name (evil.example resolving to 127.0.0.1) is refused.
    rebound = urllib.request.Request(url, headers={"Host": "evil.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(rebound, timeout=10)
    assert refused.value.code == 421
