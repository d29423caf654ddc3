"""The run's models, made once each by name, api and endpoint: the run's endpoint, a
profile's own (from the user's config), or the bundled model that serves the workers
(--workers-local)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from supervisor import settings
from workers.assembly.profiles import Profile
from workers.model import (
    Api,
    AssistantTurn,
    CallOptions,
    Endpoint,
    MakeModel,
    Message,
    Model,
    ModelError,
    shown_url,
)
from workers.model.openai_client import OpenAIModel
from workers.model.responses_client import ResponsesModel


def model_factory(
    run_config: settings.Settings, local: settings.Settings | None = None
) -> MakeModel:
    """Models by name, api and endpoint, made once each. `local`: the settings of the
    bundled model served for the workers (--workers-local), used for calls to it."""
    models: dict[tuple[str, str, Endpoint | None], Model] = {}
    lock = threading.Lock()

    def make(name: str | None, api: Api | None = None, endpoint: Endpoint | None = None) -> Model:
        at_local = (
            local is not None and endpoint is not None and endpoint.base_url == local.base_url
        )
        config = local if at_local and local is not None else run_config
        name, api = name or config.model, api or config.api
        if at_local:
            api = "chat"  # llama.cpp's server speaks Chat Completions, whatever the run's
        extra: dict[str, Any] = {"store": config.responses_store} if api == "responses" else {}
        kind = ResponsesModel if api == "responses" else OpenAIModel
        base_url, api_key = config.base_url, config.api_key
        if endpoint is not None and not at_local:  # a profile's own, from the user's config
            key_env = endpoint.api_key_env
            if key_env and not os.environ.get(key_env):
                return KeyNotSet(name, key_env, endpoint.base_url)
            base_url, api_key = endpoint.base_url, os.environ.get(key_env) if key_env else None
        with lock:
            if (name, api, endpoint) not in models:
                models[name, api, endpoint] = kind(
                    **extra,
                    model=name,
                    base_url=base_url,
                    api_key=api_key,
                    max_attempts=config.max_attempts,
                    request_timeout=config.request_timeout,
                    first_byte_timeout=config.first_byte_timeout,
                    stream=config.stream,
                    max_output_tokens=config.max_output_tokens,
                    temperature=config.temperature,
                    tool_prefill=config.tool_prefill,
                    tool_name_prefill=config.tool_name_prefill,
                    answer_prefill=config.answer_prefill,
                    varied_sampling=config.varied_sampling,
                    stop_texts=config.stop_texts,
                    calls_as_text=config.calls_as_text,
                )
            return models[name, api, endpoint]

    return make


@dataclass
class KeyNotSet:
    """The model of a profile whose endpoint's key variable is not set: each call fails
    with one line saying so (the other agents of the run go on)."""

    name: str
    key_env: str
    base_url: str

    def complete(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]],
        options: CallOptions = CallOptions(),
    ) -> AssistantTurn:
        raise ModelError(
            "auth", f"{self.key_env} is not set: it holds the key for {shown_url(self.base_url)}"
        )


def on_local(
    profiles: dict[str, Profile], top: str, local: settings.Settings
) -> dict[str, Profile]:
    """Every profile but the top agent's on the local model: its model, its endpoint
    (no key), its window."""
    assert local.base_url is not None
    moved: dict[str, Any] = {
        "model": local.model,
        "api": None,
        "base_url": local.base_url,
        "api_key_env": None,
        "context_window": local.context_window,
    }
    return {
        name: profile if name == top else profile.model_copy(update=moved)
        for name, profile in profiles.items()
    }
