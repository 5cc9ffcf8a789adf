"""The report: a pure function of the projections, serialized canonically.

``build_report`` runs the statistics library on the projection's tables with the
bootstrap seed derived from the campaign ids (``report_seed``), and adds what the
library does not cover: the rule judge's reference checks and tags per agent,
infrastructure failures counted apart, run states, the judges, and a banner when a
campaign is scripted. Nothing here reads a clock, so replaying the log rebuilds the
same ``report_json`` bytes.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Literal

import polars as pl
from pydantic import BaseModel, ConfigDict

from .canonical import canonical_json
from .fold import RULES_JUDGE
from .projections import Projections
from .statistics import (
    ANCHOR,
    DEFAULT_RESAMPLES,
    Row,
    StatisticsReport,
    compute_statistics,
)

__all__ = [
    "REPORT_FORMAT",
    "CampaignInfo",
    "InfrastructureFailures",
    "JudgeInfo",
    "ReferenceCheckRate",
    "Report",
    "RuleTagRate",
    "RunStateCount",
    "build_report",
    "report_frames",
    "report_json",
    "report_seed",
]

REPORT_FORMAT = 1
GroupBy = Literal["domain", "phase", "difficulty"]


class CampaignInfo(Row):
    """A campaign in the report."""

    campaign_id: str
    name: str
    scripted: bool
    """True when agents and judges were scripted stand-ins, not real models."""
    epochs: int
    n_tasks: int
    n_agents: int
    rubric_id: str
    rubric_version: int


class JudgeInfo(Row):
    """A judge seen in the log, with how much it judged."""

    judge_id: str
    kind: str
    """'llm' or 'rules' (the deterministic rule judge: tags and checks, no scores)."""
    family: str
    model: str
    n_verdicts: int
    n_runs: int
    n_failures: int
    """JudgmentFailed records (after repairs)."""


class RunStateCount(Row):
    """How many runs are in a lifecycle state."""

    state: str
    n_runs: int


class InfrastructureFailures(Row):
    """Runs lost to infrastructure, per agent and stage (never scored)."""

    agent_id: str
    stage: str
    n_runs: int


class ReferenceCheckRate(Row):
    """Share of the rule judge's reference checks an agent's runs passed."""

    group: str | None
    agent_id: str
    n_runs: int
    """Runs with at least one check (infrastructure failures excluded)."""
    n_checks: int
    n_passed: int
    pass_rate: float
    """Passed checks / checks, pooled over runs."""
    weighted_pass_rate: float
    """Σ weight of passed checks / Σ weight, pooled over runs."""


class RuleTagRate(Row):
    """Share of an agent's rule-checked runs that the rule judge tagged."""

    group: str | None
    agent_id: str
    tag: str
    n_runs: int
    n_tagged: int
    rate: float


class Report(BaseModel):
    """Everything `assay report` shows, rebuilt from the log alone."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    format: int = REPORT_FORMAT
    campaigns: tuple[CampaignInfo, ...]
    scripted: bool
    """Show a 'scripted campaign' banner: some campaign used scripted stand-ins."""
    log_sequence: int
    """Last stream sequence folded into the projections."""
    group_by: str | None
    anchor: int
    judges: tuple[JudgeInfo, ...]
    run_states: tuple[RunStateCount, ...]
    infrastructure_failures: tuple[InfrastructureFailures, ...]
    reference_checks: tuple[ReferenceCheckRate, ...]
    rule_tags: tuple[RuleTagRate, ...]
    statistics: StatisticsReport


def report_seed(campaign_ids: list[str]) -> int:
    """Bootstrap seed: the first 8 bytes of sha256 over the sorted campaign ids."""
    text = "assay-report\x1f" + "\x1f".join(sorted(campaign_ids))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def _campaigns(p: Projections, ids: list[str]) -> tuple[CampaignInfo, ...]:
    runs = p.table("runs")
    out = []
    for cid in ids:
        spec = p.state.campaigns.get(cid, {})
        mine = runs.filter(pl.col("campaign_id") == cid)
        rubric = spec.get("rubric", {})
        out.append(
            CampaignInfo(
                campaign_id=cid,
                name=spec.get("name", ""),
                scripted=bool(spec.get("scripted", False)),
                epochs=int(spec.get("epochs", 1)),
                n_tasks=mine["task_id"].n_unique(),
                n_agents=mine["agent_id"].n_unique(),
                rubric_id=rubric.get("rubric_id", ""),
                rubric_version=int(rubric.get("version", 0)),
            )
        )
    return tuple(out)


def _judges(p: Projections, ids: list[str]) -> tuple[JudgeInfo, ...]:
    verdicts = p.table("verdicts").filter(pl.col("campaign_id").is_in(ids))
    failures = p.table("judgment_failures").filter(pl.col("campaign_id").is_in(ids))
    out = []
    for j in sorted(p.state.judges.values(), key=lambda j: j.judge_id):
        mine = verdicts.filter(pl.col("judge_id") == j.judge_id)
        if not set(j.campaigns) & set(ids) and mine.height == 0:
            continue
        out.append(
            JudgeInfo(
                judge_id=j.judge_id,
                kind="rules" if j.judge_id == RULES_JUDGE else "llm",
                family=j.family,
                model=j.model,
                n_verdicts=mine.height,
                n_runs=mine["run_id"].n_unique(),
                n_failures=failures.filter(pl.col("judge_id") == j.judge_id).height,
            )
        )
    return tuple(out)


def _group_key(group_by: GroupBy | None) -> pl.Expr:
    return pl.col(group_by) if group_by else pl.lit(None, dtype=pl.String)


def _reference_checks(
    checks: pl.DataFrame, runs: pl.DataFrame, group_by: GroupBy | None
) -> tuple[ReferenceCheckRate, ...]:
    ok = runs.filter(~pl.col("infrastructure_failure")).select(
        "run_id", _group_key(group_by).alias("group")
    )
    c = checks.filter(pl.col("judge_id") == RULES_JUDGE).join(ok, on="run_id", how="inner")
    agg = (
        c.group_by("group", "agent_id")
        .agg(
            pl.col("run_id").n_unique().alias("n_runs"),
            pl.len().alias("n_checks"),
            pl.col("passed").sum().alias("n_passed"),
            (pl.col("weight") * pl.col("passed")).sum().alias("w_passed"),
            pl.col("weight").sum().alias("w"),
        )
        .sort("group", "agent_id", nulls_last=False)
    )
    return tuple(
        ReferenceCheckRate(
            group=r["group"],
            agent_id=r["agent_id"],
            n_runs=r["n_runs"],
            n_checks=r["n_checks"],
            n_passed=r["n_passed"],
            pass_rate=r["n_passed"] / r["n_checks"],
            weighted_pass_rate=r["w_passed"] / r["w"] if r["w"] > 0 else float("nan"),
        )
        for r in agg.iter_rows(named=True)
    )


def _rule_tags(
    p: Projections, runs: pl.DataFrame, group_by: GroupBy | None
) -> tuple[RuleTagRate, ...]:
    ok = runs.filter(~pl.col("infrastructure_failure")).select(
        "run_id", "agent_id", _group_key(group_by).alias("group")
    )
    checked = (
        p.table("verdicts")
        .filter(pl.col("judge_id") == RULES_JUDGE)
        .select("run_id")
        .unique()
        .join(ok, on="run_id", how="inner")
    )
    denom = checked.group_by("group", "agent_id").agg(pl.len().alias("n_runs"))
    tagged = (
        p.table("tags")
        .filter(pl.col("judge_id") == RULES_JUDGE)
        .select("run_id", "tag")
        .unique()
        .join(checked, on="run_id", how="inner")
        .group_by("group", "agent_id", "tag")
        .agg(pl.len().alias("n_tagged"))
    )
    counts: dict[tuple[str | None, str, str], int] = {
        (g, a, t): n for g, a, t, n in tagged.iter_rows()
    }
    tags = sorted({t for _, _, t in counts})
    out = []
    for g, a, n in denom.sort("group", "agent_id", nulls_last=False).iter_rows():
        for tag in tags:
            k = counts.get((g, a, tag), 0)
            out.append(RuleTagRate(group=g, agent_id=a, tag=tag, n_runs=n, n_tagged=k, rate=k / n))
    return tuple(out)


def build_report(
    p: Projections,
    *,
    campaign: str | None = None,
    group_by: GroupBy | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    anchor: int = ANCHOR,
) -> Report:
    """The report of one campaign (or of every campaign in the log when None)."""
    known = sorted(set(p.state.campaigns) | set(p.table("runs")["campaign_id"].to_list()))
    ids = [campaign] if campaign is not None else known
    tables = p.statistics_tables(ids)
    stats = compute_statistics(
        tables, seed=report_seed(ids), n_resamples=n_resamples, group_by=group_by, anchor=anchor
    )
    runs = p.table("runs").filter(pl.col("campaign_id").is_in(ids))
    states: dict[str, int] = defaultdict(int)
    for s in runs["state"].to_list():
        states[s] += 1
    infra = (
        runs.filter(pl.col("infrastructure_failure"))
        .group_by("agent_id", "failure_stage")
        .agg(pl.len())
        .sort("agent_id", "failure_stage")
    )
    campaigns = _campaigns(p, ids)
    return Report(
        campaigns=campaigns,
        scripted=any(c.scripted for c in campaigns),
        log_sequence=p.state.last_sequence,
        group_by=group_by,
        anchor=anchor,
        judges=_judges(p, ids),
        run_states=tuple(RunStateCount(state=k, n_runs=v) for k, v in sorted(states.items())),
        infrastructure_failures=tuple(
            InfrastructureFailures(agent_id=a, stage=s, n_runs=n) for a, s, n in infra.iter_rows()
        ),
        reference_checks=_reference_checks(p.table("checks"), runs, group_by),
        rule_tags=_rule_tags(p, runs, group_by),
        statistics=stats,
    )


def report_json(report: Report) -> bytes:
    """The report as canonical JSON bytes (the unit of `assay replay --verify`)."""
    return canonical_json(report)


def report_frames(report: Report) -> dict[str, pl.DataFrame]:
    """Every table of the report as a polars frame (statistics and the added sections)."""
    out = dict(report.statistics.frames())
    for name, row_type in (
        ("campaigns", CampaignInfo),
        ("judges", JudgeInfo),
        ("run_states", RunStateCount),
        ("infrastructure_failures", InfrastructureFailures),
        ("reference_checks", ReferenceCheckRate),
        ("rule_tags", RuleTagRate),
    ):
        out[name] = row_type.to_frame(getattr(report, name))
    return out
