"""Every benchmark of `make bench` runs through at its tiny size: none can break unseen
(bench/common.py's `tiny_sizes`). What they measure is not judged here; speed targets
belong to the benchmarks, on a quiet machine."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from bench.common import Row, tiny_sizes
from bench.suite import BENCHMARKS
from tests.conftest import must_run_here


@pytest.mark.parametrize("bench", BENCHMARKS, ids=lambda b: b.__name__.rsplit(".", 1)[-1])
def test_each_benchmark_runs_through_at_its_tiny_size(bench: ModuleType) -> None:
    with tiny_sizes():
        rows: list[Row] = bench.run()
    assert rows and all(isinstance(row.value, int | float) for row in rows)
    skipped = [row.name for row in rows if "skipped" in row.name]
    if skipped and bench.__name__ != "bench.prompt_tokens":  # it needs the local model
        must_run_here(f"{bench.__name__} did not run: {skipped[0]}")


def test_the_prompt_token_count_runs_against_an_endpoint(tmp_path: object) -> None:
    """The benchmark's own measure, against a scripted endpoint: the local model it runs
    on in `make bench` is not fetched in CI."""
    from pathlib import Path

    from bench.prompt_tokens import WORKSPACE, first_prompt_tokens
    from tests.fake_openai import FakeOpenAI, Reply
    from workers.model.openai_client import OpenAIModel

    with FakeOpenAI([Reply(text="x", prompt_tokens=1234)]) as server:
        model = OpenAIModel(model="m", base_url=server.base_url, api_key="k")
        assert first_prompt_tokens(model, Path(WORKSPACE), "explorer") == 1234
        system = server.requests[0]["messages"][0]["content"]
    assert "explorer" in system or "read" in system.lower()


def test_a_bench_longer_than_a_sitting_goes_on_where_it_stopped(tmp_path: Path) -> None:
    """bench-agent keeps each result as it comes; started again on the same gaffer it
    runs only what is missing, and a file of another gaffer is refused."""
    from bench.agent_tasks import Exercise, Result, run_suite
    from bench.kept_results import KeptResults, OtherGaffer

    ran: list[str] = []

    def way(exercise: Exercise) -> Result:
        ran.append(exercise.name)
        if exercise.name == "b" and len(ran) == 2:
            raise KeyboardInterrupt  # the sitting ends here
        return Result(solved=True, tokens=10, wall_s=1.0, exit_code=0, verdict="verified")

    chosen = [Exercise(name, tmp_path) for name in ("a", "b", "c")]
    kept_file = tmp_path / "kept.jsonl"
    with pytest.raises(KeyboardInterrupt):
        run_suite(chosen, {"gaffer": way}, KeptResults(kept_file, "abc"), "ours")
    results = run_suite(chosen, {"gaffer": way}, KeptResults(kept_file, "abc"), "ours")
    assert ran == ["a", "b", "b", "c"], "a was not run again"
    assert [r.solved for r in results["gaffer"]] == [True, True, True]
    with pytest.raises(OtherGaffer, match="holds results of abc"):
        KeptResults(kept_file, "def")
