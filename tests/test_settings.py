"""Settings: defaults < user config < workspace config < environment < flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor import settings
from workers import trust


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in settings.ENV_VARS.values():
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def load(workspace: Path, flags: dict[str, object]) -> settings.Settings:
    """Settings as a run in a trusted workspace loads them."""
    return settings.load(flags, trust.evaluate(workspace, trust_all=True).config())


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_layers_in_order(workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(
        tmp_path / "config/gaffer/config.toml",
        'model = "user"\nmax_steps = 5\nbase_url = "http://127.0.0.1:1/v1"\n',
    )
    write(workspace / ".gaffer/config.toml", 'model = "workspace"\nmax_steps = 7\n')
    loaded = load(workspace, {})
    assert (loaded.model, loaded.max_steps, loaded.base_url) == (
        "workspace",
        7,
        "http://127.0.0.1:1/v1",
    )
    monkeypatch.setenv("GAFFER_MODEL", "env")
    assert load(workspace, {}).model == "env"
    assert load(workspace, {"model": "flag", "max_steps": None}).model == "flag"


def test_unknown_key_and_bad_value_name_the_file(workspace: Path) -> None:
    write(workspace / ".gaffer/config.toml", "max_stepz = 3\n")
    with pytest.raises(settings.ConfigError, match=r"config.toml: unknown key 'max_stepz'"):
        load(workspace, {})
    write(workspace / ".gaffer/config.toml", "max_steps = 0\n")
    with pytest.raises(
        settings.ConfigError, match=r"config.toml: max_steps: Input should be greater"
    ):
        load(workspace, {})
    write(workspace / ".gaffer/config.toml", "max_steps = [\n")
    with pytest.raises(settings.ConfigError, match="not valid TOML"):
        load(workspace, {})


def test_a_repository_cannot_redirect_the_endpoint_or_hold_keys(
    workspace: Path, tmp_path: Path
) -> None:
    write(workspace / ".gaffer/config.toml", 'base_url = "http://evil.example/v1"\n')
    with pytest.raises(settings.ConfigError, match="'base_url' cannot be set in this file"):
        load(workspace, {})
    write(tmp_path / "config/gaffer/config.toml", 'api_key = "sk-x"\n')
    with pytest.raises(settings.ConfigError, match="'api_key' cannot be set"):
        load(tmp_path, {})


def test_api_key_comes_from_the_environment_and_never_shows(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    loaded = load(workspace, {})
    assert loaded.api_key == "sk-secret"
    assert "sk-secret" not in repr(loaded) and "api_key" not in loaded.model_dump()


def test_an_untrusted_workspace_config_is_not_used(workspace: Path) -> None:
    write(workspace / ".gaffer/config.toml", 'model = "workspace"\nmax_steps = 7\n')
    untrusted = trust.evaluate(workspace)
    assert untrusted.config() is None
    assert settings.load({}, untrusted.config()).max_steps != 7
    assert untrusted.notices() == [
        "skipped config .gaffer/config.toml (not trusted; `gaffer trust` shows it and asks)"
    ]


def test_the_flags_of_run_and_chat_are_made_from_the_settings() -> None:
    import click

    from supervisor import cli

    for command in ("run", "chat"):
        options = {p.name: p for p in cli.main.commands[command].params}
        assert set(settings.FLAGS) <= options.keys()
        assert options["max_steps"].opts == ["--max-steps"]
        assert options["max_steps"].type is click.INT
        assert options["stream"].opts == ["--no-stream"], "on by default: a flag turns it off"
        assert options["log_dir"].help is not None and "GAFFER_LOG_DIR" in options["log_dir"].help
    assert all(name in settings.Settings.model_fields for name in settings.FLAGS)


def test_the_trust_variable_the_help_names_is_the_one_gaffer_reads() -> None:
    from supervisor import run_flags

    assert run_flags.TRUST_ENV == trust.TRUST_ENV
