"""What a completion cost, from its normalized usage and a price table."""

from __future__ import annotations

from collections.abc import Mapping

from assay_schemas import Price, Usage

__all__ = ["DEFAULT_PRICES", "Price", "PriceTable", "cost", "price_for"]


PriceTable = Mapping[str, Price]
"""Model name (or name prefix) to price."""

# List prices at the time of writing; a campaign should pin its own table so that costs in
# a report do not change when this default is updated.
DEFAULT_PRICES: PriceTable = {
    "gpt-4o": Price(input_per_mtok=2.50, output_per_mtok=10.00, cached_input_per_mtok=1.25),
    "gpt-4o-mini": Price(input_per_mtok=0.15, output_per_mtok=0.60, cached_input_per_mtok=0.075),
    "gpt-4.1": Price(input_per_mtok=2.00, output_per_mtok=8.00, cached_input_per_mtok=0.50),
    "gpt-4.1-mini": Price(input_per_mtok=0.40, output_per_mtok=1.60, cached_input_per_mtok=0.10),
    "gpt-4.1-nano": Price(input_per_mtok=0.10, output_per_mtok=0.40, cached_input_per_mtok=0.025),
    "gpt-5": Price(input_per_mtok=1.25, output_per_mtok=10.00, cached_input_per_mtok=0.125),
    "gpt-5-mini": Price(input_per_mtok=0.25, output_per_mtok=2.00, cached_input_per_mtok=0.025),
    "gpt-5-nano": Price(input_per_mtok=0.05, output_per_mtok=0.40, cached_input_per_mtok=0.005),
    "o3-mini": Price(input_per_mtok=1.10, output_per_mtok=4.40, cached_input_per_mtok=0.55),
    "o3": Price(input_per_mtok=2.00, output_per_mtok=8.00, cached_input_per_mtok=0.50),
    "o4-mini": Price(input_per_mtok=1.10, output_per_mtok=4.40, cached_input_per_mtok=0.275),
    "claude-opus-4": Price(input_per_mtok=15.00, output_per_mtok=75.00, cached_input_per_mtok=1.50),
    "claude-sonnet-4": Price(
        input_per_mtok=3.00, output_per_mtok=15.00, cached_input_per_mtok=0.30
    ),
    "claude-3-7-sonnet": Price(
        input_per_mtok=3.00, output_per_mtok=15.00, cached_input_per_mtok=0.30
    ),
    "claude-3-5-haiku": Price(
        input_per_mtok=0.80, output_per_mtok=4.00, cached_input_per_mtok=0.08
    ),
    "claude-haiku-4-5": Price(
        input_per_mtok=1.00, output_per_mtok=5.00, cached_input_per_mtok=0.10
    ),
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
