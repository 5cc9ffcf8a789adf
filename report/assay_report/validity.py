"""Judge validity from the log: control runs and human verdicts against the jury.

Control runs are the runs of control agents whose ``ControlDeclared`` names the same
plan (a declaration cannot relabel an agent's run). Each LLM judge's run score on them,
each rule check (10 passed, 0 failed) and the jury's mean give sensitivity and
specificity; the jury's and each judge's rates correct every agent's pass share
(Rogan–Gladen). Human verdicts (judge kind "human", folded apart from the jury's: see
:mod:`.review`) give each judge's agreement with them, where some are in.
"""

from __future__ import annotations

import polars as pl
from pydantic import BaseModel, ConfigDict

from assay_schemas import RULES_JUDGE_ID

from .projections import Projections
from .review import RaterFrames, agreement_by_runs, rater_frames
from .state import ControlRecord, RunRecord
from .statistics import (
    RULE_CHECKS,
    AnalysisSettings,
    ControlRate,
    CorrectedPassShare,
    HumanAgreement,
    HumanBias,
    StatisticsWarning,
    control_rate_rows,
    corrected_pass_rows_by_family,
    validity_warnings,
)

__all__ = [
    "NOT_ON_CONTROLS",
    "REFERENCE_CHECKS",
    "JudgeValidity",
    "control_frame",
    "judge_validity",
]

REFERENCE_CHECKS = "rules:reference_checks"
"""The rule judge's pseudo-judge 'every reference check of the task passed'."""
NOT_ON_CONTROLS: frozenset[str] = frozenset()
"""Rule checks that would measure nothing on controls: none, since a control runs its
code as an agent does (only `not_executed` leaves it unrun), so 'scripts_executed' has
its row like every other check."""


class JudgeValidity(BaseModel):
    """The report's "Judge validity" section."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    n_control_runs: int
    """Declared control runs of the report's campaigns with at least one verdict."""
    control_rates: tuple[ControlRate, ...]
    """Se/Sp per LLM judge and for the jury's mean (judge_id None), overall and per variant."""
    rule_rates: tuple[ControlRate, ...]
    """Se/Sp of each rule check ('rules:<check>') and of the reference checks together."""
    corrected_pass_shares: tuple[CorrectedPassShare, ...]
    """Each agent's pass share corrected by the jury's (judge_id None) and each judge's rates."""
    human_agreement: tuple[HumanAgreement, ...]
    """On agents' runs and on control runs apart (``runs``)."""
    human_bias: tuple[HumanBias, ...]
    warnings: tuple[StatisticsWarning, ...]


def _judge_scores(p: Projections, campaigns: list[str]) -> pl.DataFrame:
    """One row per run × judge: the judge run score (mean over samples and dimensions)."""
    j = p.table("judgments").filter(pl.col("campaign_id").is_in(campaigns))
    j = j.filter(pl.col("judge_id") != RULES_JUDGE_ID)
    return j.group_by("task_id", "run_id", "agent_id", "judge_id").agg(
        pl.col("score").cast(pl.Float64).mean()
    )


def _controls(p: Projections, campaigns: list[str]) -> pl.DataFrame:
    """Valid control runs: run id, task, variant, expected. A declaration names the first
    attempt; `assay retry` makes later ones of the same (task, agent, epoch), and the
    latest attempt is the one measured, as for agents' runs. A run is labelled by the plan
    it played (`RunRecord.control_plan`: the declared one, or the one it chose)."""
    labels: dict[tuple[str, str, str], ControlRecord] = {}
    declared: dict[tuple[str, str, str, int], ControlRecord] = {}
    for c in p.state.controls.values():
        labels.setdefault((c.campaign_id, c.task_id, c.plan_sha256), c)
        run = p.state.runs.get(c.run_id)
        if c.campaign_id not in campaigns or run is None:
            continue
        if not run.control_plan or run.task_id != c.task_id:
            continue  # a declaration never relabels an agent's run
        declared[(run.campaign_id, run.task_id, run.agent_id, run.epoch)] = c
    latest: dict[tuple[str, str, str, int], RunRecord] = {}
    for r in sorted(p.state.runs.values(), key=lambda r: r.attempt):
        if r.control_plan and (key := (r.campaign_id, r.task_id, r.agent_id, r.epoch)) in declared:
            latest[key] = r
    rows = []
    for r in latest.values():
        label = labels.get((r.campaign_id, r.task_id, r.control_plan))
        if label is not None:
            rows.append((r.run_id, r.task_id, label.kind, label.expected))
    schema = {
        "run_id": pl.String,
        "task_id": pl.String,
        "variant": pl.String,
        "expected": pl.String,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def control_frame(p: Projections, campaigns: list[str]) -> pl.DataFrame:
    """Control verdicts of the LLM judges (``CONTROLS_SCHEMA``)."""
    scores = _judge_scores(p, campaigns)
    c = _controls(p, campaigns)
    return scores.join(c.drop("task_id"), on="run_id", how="inner").select(
        "task_id", "run_id", "judge_id", "variant", "expected", "score"
    )


def _rule_frame(p: Projections, campaigns: list[str]) -> pl.DataFrame:
    """Control verdicts of each built-in rule check and of the reference checks together."""
    checks = p.table("checks").filter(
        pl.col("campaign_id").is_in(campaigns) & (pl.col("judge_id") == RULES_JUDGE_ID)
    )
    checks = checks.join(_controls(p, campaigns).drop("task_id"), on="run_id", how="inner")
    shown = [c for c in RULE_CHECKS if c not in NOT_ON_CONTROLS]
    builtin = checks.filter(pl.col("name").is_in(shown)).with_columns(
        judge_id=pl.lit("rules:") + pl.col("name")
    )
    reference = (
        checks.filter(~pl.col("name").is_in(list(RULE_CHECKS)))
        .group_by("task_id", "run_id", "variant", "expected")
        .agg(pl.col("passed").all())
        .with_columns(judge_id=pl.lit(REFERENCE_CHECKS))
    )
    cols = ["task_id", "run_id", "judge_id", "variant", "expected", "passed"]
    both = pl.concat([builtin.select(cols), reference.select(cols)])
    both = both.group_by("task_id", "run_id", "judge_id", "variant", "expected").agg(
        pl.col("passed").all()
    )
    return both.with_columns(score=pl.when(pl.col("passed")).then(10.0).otherwise(0.0)).drop(
        "passed"
    )


def _scored_runs(p: Projections, campaigns: list[str], judge_id: str | None) -> pl.DataFrame:
    """Agents' runs (no control, latest attempts) scored by one judge or the jury's mean."""
    real = p.statistics_tables(campaigns).runs.select("run_id")
    s = _judge_scores(p, campaigns).join(real, on="run_id", how="semi")
    s = s.filter(pl.col("judge_id") == judge_id) if judge_id is not None else s
    return s.group_by("task_id", "run_id", "agent_id").agg(pl.col("score").mean())


def _families(p: Projections, campaigns: list[str]) -> dict[str, str]:
    """Run id → the family its request wore: an agent's own, a control's look-alike's (the
    house style it answered in)."""
    runs = p.table("runs").filter(pl.col("campaign_id").is_in(campaigns))
    return dict(zip(runs["run_id"].to_list(), runs["agent_family"].to_list(), strict=True))


def _raters(p: Projections, campaigns: list[str]) -> RaterFrames:
    """The LLM judges' and the reviewers' ratings of the campaigns' latest attempts."""
    frames = [rater_frames(p, c) for c in campaigns]
    return RaterFrames(pl.concat([f.judges for f in frames]), pl.concat([f.humans for f in frames]))


def judge_validity(
    p: Projections, campaigns: list[str], settings: AnalysisSettings
) -> JudgeValidity | None:
    """The section for some campaigns; None when they have neither controls nor humans."""
    if not campaigns:
        return None  # an empty log: nothing measured yet
    controls = control_frame(p, campaigns)
    raters = _raters(p, campaigns)
    humans = raters.humans
    if controls.height == 0 and humans.height == 0:
        return None
    rates: tuple[ControlRate, ...] = ()
    rules: tuple[ControlRate, ...] = ()
    corrected: list[CorrectedPassShare] = []
    if controls.height:
        rates = control_rate_rows(controls, settings)
        rule_frame = _rule_frame(p, campaigns)
        if rule_frame.height:
            rules = tuple(r for r in control_rate_rows(rule_frame, settings) if r.judge_id)
        families = _families(p, campaigns)
        for judge in [None, *sorted(set(controls["judge_id"].to_list()))]:
            runs = _scored_runs(p, campaigns, judge)
            if runs.height == 0:
                continue
            corrected += corrected_pass_rows_by_family(
                runs, controls, families, settings, judge_id=judge
            )
    agreement, bias = agreement_by_runs(raters, p.control_runs(), settings)
    return JudgeValidity(
        n_control_runs=controls["run_id"].n_unique(),
        control_rates=rates,
        rule_rates=rules,
        corrected_pass_shares=tuple(corrected),
        human_agreement=agreement,
        human_bias=bias,
        warnings=tuple(validity_warnings((*rates, *rules), corrected, agreement)),
    )
