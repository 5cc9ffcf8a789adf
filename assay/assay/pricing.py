"""What a completion cost, from its normalized usage and a price table.

A price belongs to the model it names and to that model's dated snapshots
(``gpt-4o-2024-08-06``, ``claude-sonnet-4-20250514``, ``…-latest``), never to another
model that merely starts with its name: ``o3-pro`` is not ``o3`` and ``gpt-4.1-mini`` is
not ``gpt-4.1``. A campaign's pinned prices override the configured table for the
models they name and their snapshots (:func:`pinned_prices`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from assay_schemas import Price, Usage

__all__ = [
    "ANTHROPIC_CACHE_WRITE_FACTOR",
    "DEFAULT_PRICES",
    "Price",
    "PriceTable",
    "cost",
    "has_price",
    "pinned_prices",
    "price_for",
]


PriceTable = Mapping[str, Price]
"""Model name to price; a name also prices its dated snapshots."""

_SNAPSHOT = re.compile(r"(?P<base>.+?)(?:-\d{4}-\d{2}-\d{2}|-\d{8}|-latest|@\d{8})")
"""A dated (or floating ``-latest``) snapshot of the model ``base``."""

# List prices at the time of writing; a campaign should pin its own table so that costs in
# a report do not change when this default is updated.
_LIST_PRICES: dict[str, tuple[float, float, float | None]] = {
    # model: USD per million input, output and cached input tokens (None: no cache price)
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
    "o3-pro": (20.00, 80.00, None),
    "o4-mini": (1.10, 4.40, 0.275),
    "claude-opus-4": (15.00, 75.00, 1.50),
    "claude-opus-4-1": (15.00, 75.00, 1.50),
    "claude-sonnet-4": (3.00, 15.00, 0.30),
    "claude-sonnet-4-5": (3.00, 15.00, 0.30),
    "claude-3-7-sonnet": (3.00, 15.00, 0.30),
    "claude-3-5-haiku": (0.80, 4.00, 0.08),
    "claude-haiku-4-5": (1.00, 5.00, 0.10),
}
ANTHROPIC_CACHE_WRITE_FACTOR = 1.25
"""Anthropic bills a (five-minute) cache write at 1.25x the input price; OpenAI's
automatic caching writes at the input price."""


def _list_price(model: str, inp: float, out: float, cached: float | None) -> Price:
    write = inp * ANTHROPIC_CACHE_WRITE_FACTOR if model.startswith("claude-") else None
    return Price(
        input_per_mtok=inp,
        output_per_mtok=out,
        cached_input_per_mtok=cached,
        cache_write_per_mtok=write,
    )


DEFAULT_PRICES: PriceTable = {
    model: _list_price(model, inp, out, cached)
    for model, (inp, out, cached) in _LIST_PRICES.items()
}

_FREE = Price()


def _snapshot_of(model: str) -> str | None:
    """The model a dated snapshot name belongs to, or None if ``model`` is not one."""
    m = _SNAPSHOT.fullmatch(model)
    return m["base"] if m else None


def _lookup(model: str, prices: PriceTable) -> Price | None:
    exact = prices.get(model)
    if exact is not None:
        return exact
    base = _snapshot_of(model)
    return prices.get(base) if base is not None else None


def price_for(model: str, prices: PriceTable = DEFAULT_PRICES) -> Price:
    """The model's own price, else that of the model it is a snapshot of; unknown: free."""
    found = _lookup(model, prices)
    return _FREE if found is None else found


def has_price(model: str, prices: PriceTable = DEFAULT_PRICES) -> bool:
    """Whether ``prices`` price ``model`` (or the model it is a snapshot of).

    An unknown model costs 0 like one priced at 0 (a local model); only this tells them
    apart, so a report can say which costs it does not know.
    """
    return _lookup(model, prices) is not None


def pinned_prices(configured: PriceTable, pinned: PriceTable) -> dict[str, Price]:
    """``configured`` overridden by a campaign's ``pinned`` prices.

    A pinned name also pins its snapshots: a configured entry for a snapshot of a
    pinned model (``gpt-4.1-2025-04-14`` when ``gpt-4.1`` is pinned) is dropped, so the
    campaign's price is the one that applies.
    """
    kept = {k: v for k, v in configured.items() if _snapshot_of(k) not in pinned}
    return {**kept, **pinned}


def cost(usage: Usage, model: str, prices: PriceTable = DEFAULT_PRICES) -> float:
    """USD cost of `usage` on `model`; 0 for models not in the table (e.g. scripted ones).

    Input read from the prompt cache is billed at the cached price and input written to
    it at the write price (each the input price where the table has none); the rest of
    the input at the input price. `Usage` guarantees the cache's parts lie within the
    input, so a provider that reports no cache fields is billed all input at full price.
    """
    price = price_for(model, prices)
    read_rate = _or_input(price.cached_input_per_mtok, price)
    write_rate = _or_input(price.cache_write_per_mtok, price)
    plain = usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens
    total = (
        plain * price.input_per_mtok
        + usage.cached_tokens * read_rate
        + usage.cache_write_tokens * write_rate
        + usage.output_tokens * price.output_per_mtok
    )
    return total / 1_000_000


def _or_input(rate: float | None, price: Price) -> float:
    return price.input_per_mtok if rate is None else rate
