"""Models whose cost a report does not know: used tokens, have no price, were logged at $0.

The runner and the judge price a completion with the default table overridden by the
campaign's pinned prices (:func:`assay.pricing.pinned_prices`); a model in neither
costs 0 without a word. The same lookup here tells which models that was. A model the
service did charge for (its own configured table priced it) is not named, nor one that
used no tokens: for those the report's 0 (or figure) is right.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from assay.pricing import DEFAULT_PRICES, PriceTable, has_price, pinned_prices

from ._tables import StatisticsInputError

__all__ = ["COST_TABLES", "USED_MODELS_SCHEMA", "unpriced_models"]

USED_MODELS_SCHEMA = pl.Schema(
    {
        "campaign_id": pl.String,
        "role": pl.String,
        "model": pl.String,
        "tokens": pl.Int64,
        "cost_usd": pl.Float64,
    }
)
"""One row per run (role ``agent``) or verdict (role ``judge``) with its model's usage."""

COST_TABLES: Mapping[str, tuple[str, ...]] = {
    "agent": ("run_costs", "agent_costs"),
    "judge": ("judge_costs",),
}
"""The report tables a role's costs feed."""


def unpriced_models(
    used: pl.DataFrame, prices: Mapping[str, PriceTable], default: PriceTable = DEFAULT_PRICES
) -> dict[str, tuple[str, ...]]:
    """Each model with no price whose logged cost is 0 despite tokens, with the tables it
    affects; ``prices`` maps a campaign id to its pinned prices (absent: none pinned)."""
    if dict(used.schema) != dict(USED_MODELS_SCHEMA):
        raise StatisticsInputError(f"used models need the columns {dict(USED_MODELS_SCHEMA)}")
    unknown = set(used["role"].unique().to_list()) - set(COST_TABLES)
    if unknown:
        raise StatisticsInputError(f"unknown roles in used models: {sorted(unknown)}")
    per = (
        used.group_by("campaign_id", "role", "model")
        .agg(pl.col("tokens").sum(), pl.col("cost_usd").sum())
        .filter((pl.col("tokens") > 0) & (pl.col("cost_usd") == 0))
    )
    out: dict[str, tuple[str, ...]] = {}
    for cid, role, model, _, _ in per.sort("model", "role", "campaign_id").iter_rows():
        if not has_price(model, pinned_prices(default, prices.get(cid, {}))):
            seen = out.get(model, ())
            out[model] = seen + tuple(t for t in COST_TABLES[role] if t not in seen)
    return out
