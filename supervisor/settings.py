"""Run settings: defaults, then config files, then environment, then flags."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from workers import state

if TYPE_CHECKING:  # not imported to run: `gaffer --help` loads this module and stays fast
    from workers.assembly.build import AgentRules
    from workers.permissions.rules import RuleFiles, RuleSet
    from workers.trust import Source
    from workers.user_hooks.config import HookSet


class ConfigError(Exception):
    """Bad settings: reported in one line, exit code 1; 64 when a flag was `usage`."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


class Price(BaseModel):
    """What a model's tokens cost, in US dollars per million."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    input: float = Field(ge=0)
    """Per million prompt tokens not read from the endpoint's cache."""
    output: float = Field(ge=0)
    """Per million completion tokens (reasoning included)."""
    cached_input: float | None = Field(None, ge=0)
    """Per million prompt tokens read from its cache; default: the input price."""

    def of(self, prompt: int, cached: int, completion: int) -> float:
        cached_price = self.input if self.cached_input is None else self.cached_input
        return (
            (prompt - cached) * self.input + cached * cached_price + completion * self.output
        ) / 1e6


class PermissionLists(BaseModel):
    """`[permissions]`: rules such as `run_shell(git push)` or `write_file(migrations/**)`
    (workers/permissions/rules.py). Every file's lists hold together, each rule with
    where it came from; deny wins over ask, ask over allow."""

    model_config = ConfigDict(extra="forbid")

    allow: list[str] = Field(default_factory=list)
    ask: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    model: str = "gpt-4.1-mini"
    """Model name sent to the endpoint."""
    base_url: str | None = None
    """OpenAI-compatible endpoint, such as http://127.0.0.1:8080/v1."""

    @field_validator("base_url")
    @classmethod
    def _an_http_url(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"https?://\S+", value):
            raise ValueError(f"must begin with http:// or https://, as in http://{value}")
        return value

    api_key: str | None = Field(None, exclude=True, repr=False)
    """API key for the endpoint; only from the environment or this flag, never a config file."""

    @field_validator("api_key")
    @classmethod
    def _a_header_can_carry_it(cls, value: str | None) -> str | None:
        if value is not None and (not value.isascii() or any(c in value for c in "\r\n\0")):
            # said without the key itself
            raise ValueError("holds a line break or a character outside ASCII: check its source")
        return value

    api_key_file: Path | None = None
    """A file holding the API key (keep it private); for when the environment will not do.
    Read only when no key is given otherwise; never from a workspace's config."""
    max_steps: int | None = Field(None, ge=1)
    """Model calls the top agent may make per task; default: its profile's."""
    max_seconds: float | None = Field(None, gt=0, le=7 * 24 * 3600, allow_inf_nan=False)
    """Wall-clock limit for the whole run."""
    max_tokens: int | None = Field(None, ge=1, le=10**12)
    max_cost: float | None = Field(None, gt=0)
    """Dollars the run may spend on model calls, every agent's together (the prices:
    model_prices): spent, the run stops at its limit (exit 2). Every model it uses must
    have a price."""
    """Prompt + completion tokens over the whole run, as the endpoint reports them."""
    api: Literal["chat", "responses"] = "chat"
    """The endpoint's wire protocol: Chat Completions (`chat`), or the Responses API
    (`responses`), which keeps a reasoning model's reasoning across tool calls."""
    responses_store: bool = False
    """On the Responses API, let the server keep each response (`store`); off, it keeps
    nothing and the reasoning comes back encrypted."""
    max_attempts: int = Field(6, ge=1, le=20)
    """Tries per model call before the endpoint counts as down."""
    request_timeout: float = Field(600.0, gt=0, le=3600, allow_inf_nan=False)
    """Seconds one model request may take."""
    first_byte_timeout: float | None = Field(180.0, gt=0, le=3600, allow_inf_nan=False)
    """Seconds a model request may wait for the server's first byte: an endpoint that
    takes the request and sends nothing (hung, or queued behind others) fails with a
    message then, not at request_timeout. None waits up to request_timeout."""
    max_output_tokens: int | None = Field(4096, ge=16, le=1_000_000)
    """Tokens one model reply may have; a runaway reply is cut there (finish_reason length)."""
    temperature: float | None = Field(None, ge=0, le=2, allow_inf_nan=False)
    """Sampling temperature; None leaves the endpoint's default."""
    stream: bool = True
    """Stream responses (text shows as it is written)."""
    log_dir: Path | None = None
    """Where run logs go; default the workspace's folder in gaffer's state folder
    (`$XDG_STATE_HOME/gaffer/workspaces/…/logs`, workers/state.py), never the workspace."""
    max_parallel: int = Field(4, ge=1, le=64)
    """Read-only workers that may run at the same time; isolated editors have as many
    places again, of their own (each works on a copy, so they need no lock with readers)."""
    isolate: bool = False
    """Each editing worker works on a copy of its own (a git worktree under
    gaffer's state folder) and runs beside the others; its changes come into the workspace
    when it ends, all or nothing, and a conflict is reported to the supervisor."""
    cluster: str | None = Field(None, pattern=r"^(ray://)?[A-Za-z0-9.\[\]:_-]+:[0-9]{1,5}$")
    """Place workers on a Ray cluster: ray://HOST:PORT (its client server), or HOST:PORT
    of a cluster this machine is a node of. Editors there are isolated (--isolate)."""
    max_depth: int = Field(2, ge=0, le=8)
    """How deep workers may delegate to workers."""
    max_workers: int = Field(32, ge=0, le=10_000)
    """Workers one run may start, all depths together."""
    verify: bool = True
    """Check final answers against the evidence (edits need a passing test after them)."""
    require_verified: bool = False
    """An answer whose change is unverified (no passing test run after the last edit)
    ends the run with exit code 4, not 0."""
    check: str | None = Field(None, min_length=1, max_length=1000)
    """The command that decides whether the workspace is right, run by gaffer itself in a
    fresh container at the end of every run that could change files; default: the one
    the task names, else the project's own tests."""
    context_window: int | None = Field(None, ge=1024, le=100_000_000)
    """The model's context window in tokens; default: known per model, else 32768."""
    sandbox_uid: int | None = Field(None, ge=1, le=2**31 - 2)
    """Run sandbox containers as this uid (default: the workspace owner's; never root)."""
    tool_prefill: str | None = None
    """The opening of a tool call in the model's own format, sent as the start of its
    reply when a call is required, for servers that ignore tool_choice (set for the
    local model)."""
    tool_name_prefill: str | None = None
    """How that opening goes on when one tool is offered, naming it (`{name}`): a call
    that can only be to that tool begins as one."""
    answer_prefill: str | None = None
    """The opening of a prose answer, sent as the start of the reply when tools are off,
    for models that write a call as text anyway (set for the local model)."""
    varied_sampling: dict[str, float] | None = None
    """Request fields sent beside a raised temperature on a call after bad replies (cut
    off, looping, unreadable, or one the run already had), for a server that honours
    them (set for the local model: llama.cpp's repetition and DRY penalties)."""
    stop_texts: bool = False
    """Send a call's stop texts (Chat Completions' `stop`): where a block for a test the
    agent may not write would begin, for an agent that writes in blocks. Off by default:
    some models refuse the field (OpenAI's reasoning models); on for the local model."""
    calls_as_text: bool = False
    """Describe the tools in the system message and read the calls from the reply's text
    (fenced JSON blocks), instead of sending `tools` for the server to parse: for a
    Chat Completions server whose parser refuses a whole reply over one badly written
    call (on for the local model)."""
    workers_local: bool = False
    """Every worker on the bundled local model, served for the run, while the top agent
    stays on the configured endpoint: the strong model plans, the local one reads and
    edits."""
    file_blocks: bool = False
    """Agents that edit write files as fenced code blocks under the file's path instead
    of write_file/edit_file calls: small models write far better code in a block than
    inside a call's JSON (on for the local model unless set here)."""

    model_prices: dict[str, Price] = Field(default_factory=dict)
    """Per model name, what its tokens cost (`[model_prices."gpt-4.1-mini"]` with
    `input`, `output`, `cached_input` in dollars per million), over gaffer's own table
    (supervisor/model_prices.toml): the cost every view shows."""
    prices: dict[str, Price] = Field(default_factory=dict)
    """model_prices' old name, still read."""

    test_runners: list[str] = Field(default_factory=list)
    """More commands the verification gate counts as test runs, besides pytest, python
    -m pytest/unittest, make test/check, npm/yarn/pnpm test, go test, cargo test, tox
    and nox: a program (`./run-tests.sh`) or a program and its first word (`bin/rails
    test`). Only what the shell's exit status comes from counts (workers/guards/test_runs.py)."""

    mode: Literal["ask-edits", "plan", "auto", "full-auto"] = "auto"
    """What is asked about when no rule says: ask-edits (every edit, with its diff), plan
    (read-only tools; the answer is a plan), auto, full-auto (nothing; containers stay)."""
    permissions: PermissionLists = Field(default_factory=PermissionLists)
    """allow / ask / deny rules for every agent's tool calls (docs/rules-and-hooks.md)."""
    hooks: dict[str, Any] = Field(default_factory=dict)
    """Commands run at moments of a run: `[[hooks.post_tool]]` with `command`, and
    `tools`, `timeout`, `env`, `in_sandbox` (docs/rules-and-hooks.md)."""
    _rules: RuleFiles | None = PrivateAttr(default=None)
    _hooks: HookSet | None = PrivateAttr(default=None)

    def hook_set(self) -> HookSet:
        """The hooks of every config file read, each with its source, in order."""
        from workers.user_hooks.config import HookSet

        return self._hooks if self._hooks is not None else HookSet()

    def rule_set(self) -> RuleSet:
        """The rules of every config file read, each with its source, in order."""
        from workers.permissions.rules import RuleSet

        return self._rules.rule_set() if self._rules is not None else RuleSet()

    def agent_rules(self) -> AgentRules:
        """How every agent of the run is held and helped, from these settings: made once
        per run and handed down whole."""
        from workers.assembly.build import AgentRules

        return AgentRules(
            verify=self.verify,
            file_blocks=self.file_blocks,
            context_window=self.context_window,
            test_runners=tuple(self.test_runners),
            # A small model (file blocks) shown its workers' answers writes them out
            # again, adding files none of them read; theirs are checked only with the gate.
            joins_reports=self.file_blocks and self.verify,
        )

    def logs_in(self, workspace: Path) -> Path:
        """The log folder: the one set, or the workspace's in the state folder (made)."""
        return self.log_dir or state.workspace_dir(workspace, state.LOGS)


FLAGS = (
    "model",
    "api",
    "base_url",
    "api_key",
    "api_key_file",
    "max_steps",
    "max_seconds",
    "max_tokens",
    "max_cost",
    "max_parallel",
    "isolate",
    "workers_local",
    "cluster",
    "log_dir",
    "stream",
    "verify",
    "require_verified",
    "check",
    "context_window",
    "sandbox_uid",
    "mode",
)
"""The settings `gaffer run` and `gaffer chat` take as flags, in the order help lists
them: `--max-steps` sets max_steps, `--no-stream` turns stream off (supervisor/cli.py)."""
ENV_VARS = {
    "model": "GAFFER_MODEL",
    "base_url": "OPENAI_BASE_URL",
    "api_key": "OPENAI_API_KEY",
    "api_key_file": "GAFFER_API_KEY_FILE",
    "log_dir": "GAFFER_LOG_DIR",
    "cluster": "GAFFER_RAY_ADDRESS",
}
# A repository's own config must not redirect the endpoint (that would send the user's
# API key to whoever wrote the repository), pick a file to send as the key, or choose
# the uid its containers run as, or send the workspace to a cluster of its choosing, or
# choose where gaffer writes its logs (a folder it controls could hold links).
NOT_IN_WORKSPACE_CONFIG = {
    "base_url",
    "api_key",
    "api_key_file",
    "sandbox_uid",
    "cluster",
    "log_dir",
    "mode",
}


def did_you_mean(word: str, choices: Iterable[str], otherwise: str) -> str:
    """ "; did you mean 'x'?" for the closest of `choices`, else "; " and `otherwise`."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else f"; {otherwise}"


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gaffer" / "config.toml"


def load(flags: dict[str, Any], workspace_config: Source | None = None) -> Settings:
    """Merge the layers; a bad file, key or value is a ConfigError naming where.

    `workspace_config` is `.gaffer/config.toml` as read and trusted (workers.trust), or
    None when the workspace has none or it is not trusted.
    """
    from workers.permissions.rules import RuleError, RuleFiles
    from workers.user_hooks.config import HookError, HookSet

    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    rules, hooks = RuleFiles(), HookSet()

    def layer(values: dict[str, Any], where: str, *, from_workspace: bool = False) -> None:
        values = dict(values)
        try:  # every file's rules and hooks hold together, each with its source
            if "permissions" in values:
                rules.add(values.pop("permissions"), where, from_workspace=from_workspace)
            if "hooks" in values:
                hooks.add(values.pop("hooks"), where)
        except (RuleError, HookError) as error:
            raise ConfigError(str(error)) from error
        merged.update(values)
        origin.update(dict.fromkeys(values, where))

    user = user_config_path()
    if user.is_file():
        layer(_read_toml(str(user), user.read_bytes(), refused={"api_key"}), str(user))
    if workspace_config is not None:
        data = _read_toml(
            workspace_config.origin, workspace_config.data, refused=NOT_IN_WORKSPACE_CONFIG
        )
        layer(data, workspace_config.origin, from_workspace=True)
    for key, var in ENV_VARS.items():
        if os.environ.get(var):
            layer({key: os.environ[var]}, f"environment variable {var}")
    layer({k: v for k, v in flags.items() if v is not None}, "the command line")
    try:
        config = Settings.model_validate(merged)
    except ValidationError as error:
        first = error.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else ""
        where = origin.get(key, "settings")
        if where == "the command line":  # said as the user wrote it, and a usage error
            flag = "--" + key.replace("_", "-")
            raise ConfigError(f"{flag}: {first['msg']}", usage=True) from error
        raise ConfigError(f"{where}: {key}: {first['msg']}") from error
    if config.api_key is None and config.api_key_file is not None:
        config = config.model_copy(update={"api_key": _key_from(config.api_key_file, origin)})
    config._rules, config._hooks = rules, hooks
    return config


def _key_from(path: Path, origin: dict[str, str]) -> str:
    where = origin.get("api_key_file", "settings")
    try:
        key = path.expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{where}: api_key_file: cannot read {path}: {error}") from error
    if not key or "\n" in key:
        raise ConfigError(f"{where}: api_key_file: {path} must hold the key alone, on one line")
    return key


def _read_toml(path: str, content: bytes, *, refused: set[str]) -> dict[str, Any]:
    try:
        data = tomllib.loads(content.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from error
    known = set(Settings.model_fields)
    for key in data:
        if key not in known:
            hint = did_you_mean(key, known, "docs/configuration.md lists the keys")
            raise ConfigError(f"{path}: unknown key {key!r}{hint}")
        if key in refused:
            raise ConfigError(
                f"{path}: {key!r} cannot be set in this file; use the environment or a flag"
            )
    try:
        Settings.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        raise ConfigError(f"{path}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from error
    return data
