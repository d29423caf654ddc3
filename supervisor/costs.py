"""What a run's tokens cost, in dollars: priced per model from gaffer's own table
(supervisor/model_prices.toml) under the user's (`model_prices` in config), and said the
same way in every view (the summary line, each worker's line, `gaffer stats`, `gaffer
logs`, the chat's /cost, the timeline page, JSON). A model with no price is "unpriced",
never $0: a guess would be worse than no number.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.settings import Price
from workers.log.reader import lines_of, of_type
from workers.log.schema import LlmCall

if TYPE_CHECKING:
    from supervisor.run_plan import RunPlan

Record = dict[str, Any]
UNPRICED = "unpriced"
_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")


@cache
def default_prices() -> dict[str, Price]:
    """gaffer's own table, as shipped."""
    table = tomllib.loads(Path(__file__).with_name("model_prices.toml").read_text("utf-8"))
    return {name: Price(**price) for name, price in table["prices"].items()}


def prices_with(*own: Mapping[str, Price]) -> dict[str, Price]:
    """gaffer's table under the user's: each of `own` overrides it model by model."""
    merged = dict(default_prices())
    for prices in own:
        merged.update(prices)
    return merged


def prices_here() -> dict[str, Price]:
    """The prices a command run here reads: gaffer's table under the user's config (and a
    trusted workspace's); gaffer's alone when the config cannot be read."""
    from supervisor import settings, trust_view
    from workers.tools.git_paths import workspace_for

    try:
        config = settings.load({}, trust_view.evaluate(workspace_for(Path.cwd())).config())
    except settings.ConfigError:
        return prices_with()
    return prices_with(config.prices, config.model_prices)


def price_of(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The model's price: its own, or, for a dated name ("gpt-4.1-mini-2025-04-14"),
    that of the model it is a version of; None: unpriced."""
    if model in prices:
        return prices[model]
    base = _DATED.sub("", model)
    return prices.get(base) if base != model else None


def unpriced(models: Iterable[str], prices: Mapping[str, Price]) -> list[str]:
    """Those of `models` with no price, sorted."""
    return sorted(name for name in set(models) if price_of(name, prices) is None)


def require_priced(max_cost: float | None, plan: RunPlan, prices: Mapping[str, Price]) -> None:
    """A run under --max-cost starts only when every model it would use has a price:
    the run's, and any a profile names (else it exits 64, saying which)."""
    if max_cost is None:
        return
    names = {plan.make_model(None).name} | {p.model for p in plan.profiles.values() if p.model}
    if missing := unpriced(names, prices):
        from supervisor.exits import EXIT_USAGE, fail

        fail(
            f"--max-cost needs a price for {', '.join(missing)}: add "
            f'[model_prices."{missing[0]}"] (input, output, cached_input: dollars per '
            "million tokens) to your config",
            EXIT_USAGE,
        )


def pricer(prices: Mapping[str, Price]) -> Callable[[str, int, int, int], float | None]:
    """A model call's cost in dollars by these prices (workers/limits.py's Budget)."""

    def price(model: str, prompt: int, cached: int, completion: int) -> float | None:
        found = price_of(model, prices)
        return None if found is None else found.of(prompt, cached, completion)

    return price


def cost_of(by_model: Mapping[str, Mapping[str, int]], prices: Mapping[str, Price]) -> float | None:
    """What these tokens (per model: input_tokens, cache_read_input_tokens,
    output_tokens) cost in dollars; None when a model among them has no price."""
    total = 0.0
    for model, used in by_model.items():
        price = price_of(model, prices)
        if price is None:
            return None
        total += price.of(
            used["input_tokens"], used["cache_read_input_tokens"], used["output_tokens"]
        )
    return round(total, 6)


def usage_of(calls: Iterable[LlmCall]) -> dict[str, dict[str, int]]:
    """Tokens per model that answered these calls."""
    found: dict[str, dict[str, int]] = {}
    for call in calls:
        used = found.setdefault(call.model, dict.fromkeys(USAGE_KEYS, 0))
        used["input_tokens"] += call.prompt_tokens
        used["cache_read_input_tokens"] += call.cached_tokens or 0
        used["output_tokens"] += call.completion_tokens
        used["calls"] += 1
    return found


USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "calls")


def cost_by_agent(records: list[Record], prices: Mapping[str, Price]) -> dict[str, float | None]:
    """Each agent's own calls' cost (a worker's, not its workers')."""
    calls: dict[str, list[LlmCall]] = {}
    for line, call in of_type(lines_of(records), LlmCall):
        calls.setdefault(line.agent_id or "?", []).append(call)
    return {agent: cost_of(usage_of(own), prices) for agent, own in calls.items()}


def run_cost(records: list[Record], prices: Mapping[str, Price]) -> float | None:
    """The whole run's cost, every agent's calls and asides together."""
    return cost_of(usage_of(call for _, call in of_type(lines_of(records), LlmCall)), prices)


def dollars(cost: float | None) -> str:
    """A cost as every view says it: `$0.0123`, `$0.00` for nothing, or `unpriced`."""
    if cost is None:
        return UNPRICED
    if cost == 0:
        return "$0.00"
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"
