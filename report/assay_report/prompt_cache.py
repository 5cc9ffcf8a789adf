"""What the providers' prompt caches did: each agent's and judge's cached share of input
tokens, and what caching saved.

Saved is what the same usage would have cost with nothing read from or written to the
cache, less what it cost: reads are billed at the cached price instead of the input
price, writes at the write price (Anthropic: 1.25x), so a cache written and never read
saves less than nothing. Both are priced with the table the services price with (the
defaults overridden by the campaign's pinned prices); a model without a price saves 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from assay.pricing import DEFAULT_PRICES, Price, PriceTable, cost, pinned_prices
from assay_schemas import RULES_JUDGE_ID, Usage

from .state import RunRecord, State, VerdictRecord
from .statistics import Row

__all__ = ["PromptCacheUse", "prompt_cache_rows", "saved_usd"]

Role = Literal["agent", "judge"]


class PromptCacheUse(Row):
    """One agent's or judge's prompt-cache use on one model, over its runs or verdicts."""

    role: Role
    member_id: str
    """The agent's or the judge's id."""
    model: str
    n: int
    """Runs (an agent's finished runs, infrastructure failures and control runs aside)
    or verdicts (on every run, controls included, as the judge cost table counts them)."""
    input_tokens: int
    cached_tokens: int
    """Input tokens read from the prompt cache."""
    cache_write_tokens: int
    """Input tokens written to it (Anthropic's cache creation)."""
    cached_share: float
    """cached_tokens / input_tokens (NaN without input)."""
    cost_usd: float
    """The cost as logged."""
    saved_usd: float
    """What the same usage would have cost without the cache, less what it cost."""


def saved_usd(usage: Usage, model: str, prices: PriceTable) -> float:
    """What `usage` would have cost with no cache reads or writes, less what it cost."""
    uncached = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    return cost(uncached, model, prices) - cost(usage, model, prices)


Key = tuple[Role, str, str, str]
"""role, member (agent or judge) id, model, campaign."""


def _uses(state: State, ids: set[str]) -> Iterator[tuple[Key, RunRecord | VerdictRecord]]:
    for r in state.runs.values():
        # A control agent's runs are blind: counted in no agent's figures, named nowhere.
        if r.control_plan or r.campaign_id not in ids:
            continue
        if r.finished and not r.infrastructure_failure:
            yield ("agent", r.agent_id, r.agent_model, r.campaign_id), r
    for v in state.verdicts.values():
        if v.campaign_id in ids and v.judge_id != RULES_JUDGE_ID:
            yield ("judge", v.judge_id, v.judge_model, v.campaign_id), v


@dataclass(slots=True)
class _Sum:
    """One member's uses of one model in one campaign, added up."""

    n: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, record: RunRecord | VerdictRecord) -> None:
        """Count one run or verdict, its tokens as `Usage` would hold them: the fold keeps
        what validated events said; clamped anyway, as the cost tables do."""
        given = record.input_tokens
        cached = min(record.cached_tokens, given)
        self.n += 1
        self.input_tokens += given
        self.output_tokens += record.output_tokens
        self.cached_tokens += cached
        self.cache_write_tokens += min(record.cache_write_tokens, given - cached)
        self.cost_usd += record.cost_usd

    def usage(self) -> Usage:
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cached_tokens=self.cached_tokens,
            cache_write_tokens=self.cache_write_tokens,
        )


def _sums(state: State, ids: set[str]) -> dict[Key, _Sum]:
    # A plain loop over every run and verdict: at 10x, 78,000 of them.
    sums: dict[Key, _Sum] = {}
    for key, record in _uses(state, ids):
        each = sums.get(key)
        if each is None:
            each = sums[key] = _Sum()
        each.add(record)
    return sums


def _pinned(state: State, ids: set[str]) -> dict[str, PriceTable]:
    return {
        c: pinned_prices(
            DEFAULT_PRICES,
            {m: Price.model_validate(v) for m, v in state.campaigns[c].get("prices", {}).items()},
        )
        for c in ids
        if c in state.campaigns
    }


def prompt_cache_rows(state: State, campaign_ids: Iterable[str]) -> tuple[PromptCacheUse, ...]:
    """One row per (role, agent or judge, model) of the campaigns, sorted.

    Tokens are summed per campaign first and priced once per sum: cost is linear in each
    kind of token, so that is what pricing each run and adding gives, without a `Usage`
    and two prices per run (a third of a 10x report's time)."""
    ids = set(campaign_ids)
    tables: Mapping[str, PriceTable] = _pinned(state, ids)
    sums = _sums(state, ids)
    totals: dict[tuple[Role, str, str], tuple[int, Usage, float, float]] = {}
    for (role, member, model, campaign), each in sums.items():
        usage = each.usage()
        saved = saved_usd(usage, model, tables.get(campaign, DEFAULT_PRICES))
        n, total, spent, saved_so_far = totals.get((role, member, model), (0, Usage(), 0.0, 0.0))
        totals[(role, member, model)] = (
            n + each.n,
            total + usage,
            spent + each.cost_usd,
            saved_so_far + saved,
        )
    return tuple(
        PromptCacheUse(
            role=role,
            member_id=member,
            model=model,
            n=n,
            input_tokens=usage.input_tokens,
            cached_tokens=usage.cached_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cached_share=usage.cached_tokens / usage.input_tokens
            if usage.input_tokens
            else float("nan"),
            cost_usd=spent,
            saved_usd=saved,
        )
        for (role, member, model), (n, usage, spent, saved) in sorted(totals.items())
    )
