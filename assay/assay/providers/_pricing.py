"""What a completion cost, from its normalized usage and a price table."""

from __future__ import annotations

from collections.abc import Mapping

from assay_schemas import Price, Usage

__all__ = ["DEFAULT_PRICES", "Price", "PriceTable", "cost", "price_for"]


PriceTable = Mapping[str, Price]
"""Model name (or name prefix) to price."""

# List prices at the time of writing; a campaign should pin its own table so that costs in
# a report do not change when this default is updated.
_LIST_PRICES: dict[str, tuple[float, float, float]] = {
    # model: USD per million input, output and cached input tokens
    "gpt-4o": (2.50, 10.00, 1.25),
    "gpt-4o-mini": (0.15, 0.60, 0.075),
    "gpt-4.1": (2.00, 8.00, 0.50),
    "gpt-4.1-mini": (0.40, 1.60, 0.10),
    "gpt-4.1-nano": (0.10, 0.40, 0.025),
    "gpt-5": (1.25, 10.00, 0.125),
    "gpt-5-mini": (0.25, 2.00, 0.025),
    "gpt-5-nano": (0.05, 0.40, 0.005),
    "o3-mini": (1.10, 4.40, 0.55),
    "o3": (2.00, 8.00, 0.50),
    "o4-mini": (1.10, 4.40, 0.275),
    "claude-opus-4": (15.00, 75.00, 1.50),
    "claude-sonnet-4": (3.00, 15.00, 0.30),
    "claude-3-7-sonnet": (3.00, 15.00, 0.30),
    "claude-3-5-haiku": (0.80, 4.00, 0.08),
    "claude-haiku-4-5": (1.00, 5.00, 0.10),
}
DEFAULT_PRICES: PriceTable = {
    model: Price(input_per_mtok=inp, output_per_mtok=out, cached_input_per_mtok=cached)
    for model, (inp, out, cached) in _LIST_PRICES.items()
}

_FREE = Price()


def price_for(model: str, prices: PriceTable = DEFAULT_PRICES) -> Price:
    """Exact match first, then the longest prefix (dated snapshots); unknown models are free."""
    exact = prices.get(model)
    if exact is not None:
        return exact
    best = ""
    for name in prices:
        if model.startswith(name) and len(name) > len(best):
            best = name
    return prices[best] if best else _FREE


def cost(usage: Usage, model: str, prices: PriceTable = DEFAULT_PRICES) -> float:
    """USD cost of `usage` on `model`; 0 for models not in the table (e.g. scripted ones)."""
    price = price_for(model, prices)
    cached = min(usage.cached_tokens, usage.input_tokens)
    cached_rate = (
        price.input_per_mtok if price.cached_input_per_mtok is None else price.cached_input_per_mtok
    )
    total = (
        (usage.input_tokens - cached) * price.input_per_mtok
        + cached * cached_rate
        + usage.output_tokens * price.output_per_mtok
    )
    return total / 1_000_000
