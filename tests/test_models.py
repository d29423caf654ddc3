"""The run's models (supervisor/models.py): the run's endpoint, a profile's own, and the
bundled model serving the workers under --workers-local."""

from __future__ import annotations

from pathlib import Path

from supervisor import settings
from supervisor.models import model_factory, on_local
from supervisor.run_setup import run_rules
from tests.helpers import gaffer
from workers.assembly.profiles import builtin_dir, load_profiles
from workers.model import Endpoint
from workers.model.openai_client import OpenAIModel
from workers.tools import BUILTIN_TOOLS

RUN = settings.Settings(model="strong", base_url="http://127.0.0.1:7/v1", api_key="sk-run")
LOCAL = RUN.model_copy(
    update={
        "model": "qwen-local",
        "base_url": "http://127.0.0.1:8/v1",
        "api_key": None,
        "max_output_tokens": 768,
        "temperature": 0.0,
        "tool_prefill": "<tool_call>",
        "context_window": 16384,
        "file_blocks": True,
    }
)


def test_with_workers_local_every_profile_but_the_top_agents_moves_to_the_local_model() -> None:
    profiles = load_profiles([builtin_dir()], BUILTIN_TOOLS)

    moved = on_local(profiles, "supervisor", LOCAL)

    assert moved["supervisor"] == profiles["supervisor"]
    for name in ("explorer", "coder", "shell", "dispatcher"):
        profile = moved[name]
        assert (profile.model, profile.base_url, profile.api_key_env) == (
            "qwen-local",
            "http://127.0.0.1:8/v1",
            None,
        )
        assert profile.context_window == 16384 and profile.tools == profiles[name].tools


def test_calls_to_the_local_model_are_made_its_way_and_the_rest_the_runs() -> None:
    make = model_factory(RUN, LOCAL)
    on_responses = model_factory(RUN.model_copy(update={"api": "responses"}), LOCAL)
    assert type(on_responses("qwen-local", None, Endpoint("http://127.0.0.1:8/v1"))) is OpenAIModel

    worker = make("qwen-local", None, Endpoint("http://127.0.0.1:8/v1"))
    top = make(None)

    assert isinstance(worker, OpenAIModel) and isinstance(top, OpenAIModel)
    assert (worker.name, worker.base_url, worker.tool_prefill) == (
        "qwen-local",
        "http://127.0.0.1:8/v1",
        "<tool_call>",
    )
    assert worker.max_output_tokens == 768 and worker.temperature == 0.0
    assert (top.name, top.base_url, top.tool_prefill) == ("strong", "http://127.0.0.1:7/v1", None)
    assert make(None) is top, "made once"


def test_workers_local_needs_an_endpoint_for_the_top_agent(workspace: Path) -> None:
    done = gaffer(workspace, "run", "--workers-local", "survey")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "gaffer: --workers-local keeps the top agent on your endpoint: set OPENAI_BASE_URL "
        "or OPENAI_API_KEY"
    )


def test_with_workers_local_a_remote_top_writes_its_own_answer() -> None:
    """The workers write the local model's way; the top, on the run's endpoint, does not
    hand back its workers' answers joined, as the bundled model's top does."""
    remote = run_rules(RUN, LOCAL, at_once=1)
    assert remote.file_blocks and not remote.joins_reports
    small_top = run_rules(LOCAL, None, at_once=1)
    assert small_top.file_blocks and small_top.joins_reports
    unchecked = run_rules(LOCAL.model_copy(update={"verify": False}), None, at_once=1)
    assert not unchecked.joins_reports, "a join leans on each worker's gate"
