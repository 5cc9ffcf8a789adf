"""Warnings: where the data cannot carry the figures computed from it.

Each warning is computed from the data itself (never from a campaign's configuration
alone) and names the report tables it affects, so a reader knows which numbers to
distrust. Thresholds are fixed here and written out in ``DEFINITIONS['warnings']``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from ._context import split_tables
from ._no_spread import zero_width
from ._results import JudgeAgreement, StatisticsWarning
from ._rows import Row
from ._tables import Tables, TaskAttribute

__all__ = [
    "CLIPPED_SHARE",
    "MIN_BOOTSTRAP_TASKS",
    "MIN_JUDGE_SD",
    "RELIABLE_ALPHA",
    "warning_rows",
]

MIN_BOOTSTRAP_TASKS = 10
"""Below this many scored tasks the task bootstrap's intervals are not trustworthy."""
MIN_JUDGE_SD = 0.25
"""A judge whose run scores vary less than this (SD, points) is (near) constant."""
CLIPPED_SHARE = 0.2
"""A judge giving at least this share of its ratings at 0 or at 10 piles at the scale's end."""
RELIABLE_ALPHA = 0.667
"""Krippendorff's lowest alpha for tentative conclusions."""

_INTERVALS = (
    "agent_scores",
    "dimension_scores",
    "judge_leaderboards",
    "pass_rates",
    "below_anchor_shares",
    "communication_gap",
    "tag_rates",
    "empty_artifact_rates",
    "self_preference",
    "pairwise_differences",
)
# Rates are never of zero width (binomial intervals at 0 or 1: see _boundary); a score's
# bootstrap can be, and is then replaced (see _no_spread).
_ZERO_WIDTH = (
    "agent_scores",
    "dimension_scores",
    "judge_leaderboards",
    "communication_gap",
    "self_preference",
    "pairwise_differences",
)
_SCORES = ("agent_scores", "dimension_scores", "pass_rates", "agent_ranks", "pairwise_differences")
_JUDGING = ("judge_agreement", "judge_correlations", "self_preference")


def _warn(
    group: str | None, kind: str, subject: str, message: str, affects: Sequence[str]
) -> StatisticsWarning:
    return StatisticsWarning(
        group=group, kind=kind, subject=subject, message=message, affects=tuple(affects)
    )


def _few_tasks(group: str | None, t: Tables) -> list[StatisticsWarning]:
    n = t.ratings["task_id"].n_unique()
    if n == 0 or n >= MIN_BOOTSTRAP_TASKS:
        return []
    extra = (
        ": every task-bootstrap interval has zero width (scores carry the bounded-scale "
        "interval of one task instead) and every rank is certain by construction"
        if n == 1
        else ""
    )
    return [
        _warn(
            group,
            "few_tasks",
            "",
            f"only {n} scored task(s), fewer than "
            f"{MIN_BOOTSTRAP_TASKS} for a task bootstrap{extra}",
            (*_INTERVALS, "agent_ranks"),
        )
    ]


def _flat(row: Row) -> bool:
    """Whether an interval row's bounds are one value (every table in `_ZERO_WIDTH` has
    them; `Row` is the union of all tables' rows, so they are read by name)."""
    low, high = getattr(row, "ci_low", float("nan")), getattr(row, "ci_high", float("nan"))
    return bool(zero_width(np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)))


def _zero_width(group: str | None, tables: Mapping[str, Sequence[Row]]) -> list[StatisticsWarning]:
    """Score intervals whose task bootstrap had no spread: named, and what replaced them."""
    out = []
    for name in _ZERO_WIDTH:
        rows = [r for r in tables[name] if getattr(r, "group", None) == group]
        flat = [r for r in rows if getattr(r, "no_spread", False) or _flat(r)]
        if flat:
            instead = _NOT_ESTIMABLE if name == "self_preference" else _BOUNDED
            out.append(
                _warn(
                    group,
                    "zero_width_interval",
                    name,
                    f"{len(flat)} of {len(rows)} task-bootstrap intervals in {name} "
                    f"have zero width (no spread across tasks): {instead}",
                    (name,),
                )
            )
    return out


_BOUNDED = (
    "printed instead with what n tasks of one value carry on the bounded scale "
    "(definitions: confidence_interval)"
)
_NOT_ESTIMABLE = "their interval is not estimable"


_RATES = {
    "pass_rates": ("pass_rate", "agent_id", "n_runs"),
    "below_anchor_shares": ("share", "judge_id", "n_ratings"),
}
"""Rate tables that compare agents or judges: the share's field, the row's name and its
trials. (A tag or empty-artifact rate at 0 is the hoped-for state, not a doubt.)"""


def _boundary(group: str | None, tables: Mapping[str, Sequence[Row]]) -> list[StatisticsWarning]:
    """Rates at 0 or 1: their interval is Clopper–Pearson's (no bootstrap can vary them)."""
    out = []
    for name, (field, who, trials) in _RATES.items():
        rows = [r for r in tables.get(name, ()) if getattr(r, "group", None) == group]
        edge = [r for r in rows if getattr(r, trials) and getattr(r, field) in (0.0, 1.0)]
        if not edge:
            continue
        named = ", ".join(
            f"{getattr(r, who) or 'all judges'} {getattr(r, field):.0%} of {getattr(r, trials)}"
            for r in edge[:3]
        )
        more = f" and {len(edge) - 3} more" if len(edge) > 3 else ""
        out.append(
            _warn(
                group,
                "boundary_interval",
                name,
                f"{len(edge)} of {len(rows)} rates "
                f"in {name} are at 0 or 1 ({named}{more}): their intervals are "
                "Clopper–Pearson's at the counts",
                (name,),
            )
        )
    return out


def _judge_scores(t: Tables) -> pl.DataFrame:
    """Each judge's run scores (mean of its ratings of the run)."""
    return t.ratings.group_by("judge_id", "run_id").agg(pl.col("score").mean().alias("s"))


def _constant_judges(group: str | None, t: Tables) -> list[StatisticsWarning]:
    spread = (
        _judge_scores(t)
        .group_by("judge_id")
        .agg(pl.col("s").std(ddof=0).alias("sd"), pl.len().alias("n"))
        .sort("judge_id")
    )
    return [
        _warn(
            group,
            "constant_judge",
            j,
            f"judge {j} gives (nearly) the same run score to all "
            f"{n} runs (SD {sd:.2f}): agreement is undefined or low and the other judges' "
            "self-preference coefficients are biased",
            _JUDGING,
        )
        for j, sd, n in spread.iter_rows()
        if n >= 2 and sd < MIN_JUDGE_SD
    ]


def _clipped(group: str | None, t: Tables) -> list[StatisticsWarning]:
    ends = (
        t.ratings.group_by("judge_id")
        .agg((pl.col("score") == 0).mean().alias("lo"), (pl.col("score") == 10).mean().alias("hi"))
        .sort("judge_id")
    )
    return [
        _warn(
            group,
            "scores_at_scale_end",
            j,
            f"judge {j} gives {100 * lo:.0f}% of its ratings "
            f"at 0 and {100 * hi:.0f}% at 10: differences beyond the scale's end are lost, "
            "which biases agreement and self-preference",
            (*_JUDGING, "agent_scores"),
        )
        for j, lo, hi in ends.iter_rows()
        if max(lo, hi) >= CLIPPED_SHARE
    ]


def _agreement(rows: Sequence[JudgeAgreement]) -> list[StatisticsWarning]:
    out = []
    for r in rows:
        a = r.krippendorff_alpha
        if math.isnan(a) and len(r.judges) >= 1:
            out.append(
                _warn(
                    r.group,
                    "agreement_undefined",
                    "",
                    "judge agreement is undefined "
                    f"({len(r.judges)} judge(s), {r.n_runs} runs rated by two or more)",
                    ("judge_agreement", "judge_correlations"),
                )
            )
        elif a < RELIABLE_ALPHA:
            out.append(
                _warn(
                    r.group,
                    "agreement_unreliable",
                    "",
                    f"Krippendorff's alpha {a:.2f} is below {RELIABLE_ALPHA}: the judges disagree",
                    ("judge_agreement", "agent_scores"),
                )
            )
    return out


def _absent(
    t: Tables, declared_agents: Sequence[str], declared_judges: Sequence[str]
) -> list[StatisticsWarning]:
    # Distinct values first: a list of every rating's id (370k at 10x) was a tenth of a report.
    agents = set(t.ratings["agent_id"].unique().to_list())
    judges = set(t.ratings["judge_id"].unique().to_list())
    out = [
        _warn(
            None,
            "agent_without_scored_runs",
            a,
            f"agent {a} is declared but has no "
            "scored run: it has no score, rank or pairwise difference",
            _SCORES,
        )
        for a in sorted(set(declared_agents) - agents)
    ]
    out += [
        _warn(
            None,
            "judge_without_scored_runs",
            j,
            f"judge {j} is declared but scored no "
            "run: it is absent from agreement and self-preference",
            _JUDGING,
        )
        for j in sorted(set(declared_judges) - judges)
    ]
    return out


def _infrastructure(t: Tables) -> list[StatisticsWarning]:
    failed = (
        t.runs.filter(pl.col("infrastructure_failure"))
        .group_by("agent_id")
        .agg(pl.len().alias("n"))
        .sort("agent_id")
    )
    totals = dict(t.runs.group_by("agent_id").agg(pl.len()).iter_rows())
    return [
        _warn(
            None,
            "infrastructure_failures",
            a,
            f"{n} of {totals[a]} runs of agent {a} were excluded as infrastructure failures",
            (*_SCORES, "run_accounting"),
        )
        for a, n in failed.iter_rows()
    ]


def _unchecked(tasks: Sequence[str]) -> list[StatisticsWarning]:
    if not tasks:
        return []
    shown = ", ".join(sorted(tasks)[:5]) + (", …" if len(tasks) > 5 else "")
    return [
        _warn(
            None,
            "tasks_without_reference_checks",
            "",
            f"{len(tasks)} task(s) have no "
            f"reference check ({shown}): their reference-check figures are empty",
            ("reference_checks", "reference_check_matrix"),
        )
    ]


def _unpriced(models: Mapping[str, Sequence[str]]) -> list[StatisticsWarning]:
    return [
        _warn(
            None,
            "model_without_price",
            m,
            f"cost of model {m} is unknown (no price in "
            "the default table or the campaign's prices); its cost figures count it as 0",
            models[m],
        )
        for m in sorted(models)
    ]


def warning_rows(
    tables: Tables,
    computed: Mapping[str, Sequence[Row]],
    *,
    group_by: TaskAttribute | None = None,
    declared_agents: Sequence[str] = (),
    declared_judges: Sequence[str] = (),
    tasks_without_checks: Sequence[str] = (),
    unpriced_models: Mapping[str, Sequence[str]] | None = None,
) -> list[StatisticsWarning]:
    """Every warning the data calls for; ``computed`` maps table names to their rows.

    ``unpriced_models`` (from :func:`unpriced_models`) maps a model logged at $0 for want
    of a price to the cost tables it affects."""
    out: list[StatisticsWarning] = []
    for group, sub in split_tables(tables, group_by):
        out += _few_tasks(group, sub)
        out += _zero_width(group, computed)
        out += _boundary(group, computed)
        out += _constant_judges(group, sub)
        out += _clipped(group, sub)
    agreement = computed["judge_agreement"]
    out += _agreement([r for r in agreement if isinstance(r, JudgeAgreement)])
    out += _absent(tables, declared_agents, declared_judges)
    out += _infrastructure(tables)
    out += _unchecked(tasks_without_checks)
    out += _unpriced(unpriced_models or {})
    return out
