"""Cost from normalized usage and a price table."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from assay.providers import (
    DEFAULT_PRICES,
    Price,
    Usage,
    cost,
    has_price,
    pinned_prices,
    price_for,
)

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


# --- attacks (issue #24, finding 16): a price must come from the model it names ---------


def test_a_different_model_is_not_priced_as_its_name_prefix() -> None:
    """o3-pro is not a dated o3 (it costs ten times more): never o3's price."""
    assert price_for("o3-pro") is not DEFAULT_PRICES["o3"]
    assert price_for("o3-pro") == Price(input_per_mtok=20.0, output_per_mtok=80.0)
    assert price_for("o3-pro-2025-06-10") is price_for("o3-pro")
    assert price_for("big-turbo", TABLE) == Price()  # unknown model: free, not "big"


def test_pinned_name_pins_its_dated_variants_over_the_default_table() -> None:
    default = {**DEFAULT_PRICES, "gpt-4.1-2025-04-14": Price(input_per_mtok=99.0)}
    pinned = {"gpt-4.1": Price(input_per_mtok=1.0, output_per_mtok=1.0)}
    table = pinned_prices(default, pinned)
    assert price_for("gpt-4.1-2025-04-14", table) is pinned["gpt-4.1"]
    assert price_for("gpt-4.1", table) is pinned["gpt-4.1"]
    # gpt-4.1-mini is another model, not a dated gpt-4.1: the pin does not reach it.
    assert price_for("gpt-4.1-mini-2025-04-14", table) is DEFAULT_PRICES["gpt-4.1-mini"]


def test_exact_match_wins_over_a_longer_prefix() -> None:
    table = {"m": Price(input_per_mtok=1.0), "m-2025-01-01": Price(input_per_mtok=2.0)}
    assert price_for("m-2025-01-01", table) is table["m-2025-01-01"]
    assert price_for("m-2025-02-02", table) is table["m"]


@pytest.mark.parametrize(
    "model, base",
    [
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
    ],
)
def test_dated_snapshots_of_listed_models_keep_their_price(model: str, base: str) -> None:
    assert price_for(model) is DEFAULT_PRICES[base]


def test_cache_writes_cost_the_write_price_and_reads_the_read_price() -> None:
    table = {"c": Price(input_per_mtok=3.0, cached_input_per_mtok=0.3, cache_write_per_mtok=3.75)}
    usage = Usage(input_tokens=1_000_000, cached_tokens=500_000, cache_write_tokens=300_000)
    # 200k plain * $3 + 500k read * $0.30 + 300k written * $3.75, per million.
    assert cost(usage, "c", table) == pytest.approx(0.6 + 0.15 + 1.125)


def test_cache_writes_cost_the_input_price_when_no_write_price() -> None:
    usage = Usage(input_tokens=1_000_000, cache_write_tokens=1_000_000)
    assert cost(usage, "big", TABLE) == pytest.approx(10.0)


def test_anthropic_list_prices_read_at_a_tenth_and_write_at_five_fourths() -> None:
    for model, price in DEFAULT_PRICES.items():
        if model.startswith("claude-"):
            assert price.cache_write_per_mtok == pytest.approx(1.25 * price.input_per_mtok)
            assert price.cached_input_per_mtok == pytest.approx(0.1 * price.input_per_mtok)
        else:  # OpenAI's automatic caching writes at the input price
            assert price.cache_write_per_mtok is None


def test_usage_without_cache_fields_costs_all_input_at_full_price() -> None:
    """A provider that ignores breakpoints reports no cache fields: nothing is discounted."""
    usage = Usage(input_tokens=1_000_000, output_tokens=0)
    assert cost(usage, "claude-sonnet-4") == pytest.approx(3.0)


# --- attacks: usage that contradicts itself is refused, never priced ---------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"input_tokens": 100, "cached_tokens": 250},
        {"input_tokens": 100, "cache_write_tokens": 101},
        {"input_tokens": 100, "cached_tokens": 60, "cache_write_tokens": 41},
        {"input_tokens": -1},
        {"cached_tokens": -5, "input_tokens": 10},
        {"cache_write_tokens": -5, "input_tokens": 10},
    ],
)
def test_contradictory_or_negative_usage_is_refused(fields: dict[str, int]) -> None:
    with pytest.raises(ValidationError):
        Usage(**fields)


def test_summed_usage_keeps_its_cache_parts() -> None:
    a = Usage(input_tokens=10, cached_tokens=4, cache_write_tokens=3)
    assert a + a == Usage(input_tokens=20, cached_tokens=8, cache_write_tokens=6)


def test_has_price_tells_an_unknown_model_from_a_free_one() -> None:
    """Class: an unknown model costs 0 like a model priced at 0; only has_price tells them apart."""
    table = {**TABLE, "local": Price()}
    assert has_price("big", table) and has_price("big-2025-01-01", table)
    assert has_price("local", table) and cost(Usage(input_tokens=9), "local", table) == 0.0
    assert not has_price("scripted-agent", table) and not has_price("bigger", table)
    assert not has_price("big-mini-2", TABLE) and has_price("gpt-4o-2024-08-06")
