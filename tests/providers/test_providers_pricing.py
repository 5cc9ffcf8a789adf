"""Cost from normalized usage and a price table."""

from __future__ import annotations

import pytest

from assay.providers import DEFAULT_PRICES, Price, Usage, cost, price_for

TABLE = {
    "big": Price(input_per_mtok=10.0, output_per_mtok=30.0, cached_input_per_mtok=1.0),
    "big-mini": Price(input_per_mtok=1.0, output_per_mtok=2.0),
}


def test_cost_prices_uncached_cached_and_output_tokens() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000, cached_tokens=400_000)
    # 600k uncached * $10 + 400k cached * $1 + 500k output * $30, per million.
    assert cost(usage, "big", TABLE) == pytest.approx(6.0 + 0.4 + 15.0)


def test_cached_tokens_cost_the_input_price_when_no_cache_price() -> None:
    usage = Usage(input_tokens=2_000_000, cached_tokens=1_000_000)
    assert cost(usage, "big-mini", TABLE) == pytest.approx(2.0)


def test_longest_prefix_wins_for_dated_snapshots() -> None:
    assert price_for("big-mini-2025-01-01", TABLE) is TABLE["big-mini"]
    assert price_for("big-2025-01-01", TABLE) is TABLE["big"]
    assert price_for("gpt-4o-mini-2024-07-18") is DEFAULT_PRICES["gpt-4o-mini"]
    assert price_for("claude-sonnet-4-20250514") is DEFAULT_PRICES["claude-sonnet-4"]


def test_unknown_and_scripted_models_are_free() -> None:
    usage = Usage(input_tokens=123_456, output_tokens=7_890)
    assert cost(usage, "scripted-agent", TABLE) == 0.0
    assert cost(usage, "scripted-agent") == 0.0


def test_default_table_has_sane_prices() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert cost(usage, "gpt-4o") == pytest.approx(12.5)
    for price in DEFAULT_PRICES.values():
        assert price.output_per_mtok >= price.input_per_mtok > 0
        assert (
            price.cached_input_per_mtok is None
            or price.cached_input_per_mtok < price.input_per_mtok
        )
