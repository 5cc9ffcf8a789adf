"""Human review on the read side: the blind queue, and the frames that measure the jury.

Human verdicts are folded into `State.human_verdicts`, apart from the jury's, so no jury
figure counts them. Here they become the statistics library's rater frames
(`RATER_SCHEMA`, one for the LLM judges and one for the humans), which feed only the
"Judge validity (human)" rows (`human_agreement_rows`).

The review queue is blind: it names a run and its task, never its agent, its verdicts or
whether it is a control, and it does not read them. Its order is an HMAC of the reviewer
and the run ids under the deployment's secret (`REVIEW_KEY`, under the home's keys):
random to the reviewer yet the same on every page load, and unpredictable to anyone who
knows only public names (run ids derive from the campaign file). Each place holds a
control as often as the campaign's share of them, whatever the reviewer knows of the
others: a queue that took controls and agents' runs in turn told every other place's
kind from one control found. And it shows a reviewer any work once: a control's epochs on
a task leave the same files and answer each time, where a sampled model's runs differ.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import NamedTuple

import polars as pl

from assay_schemas import RULES_JUDGE_ID, is_reviewer_id

from .projections import Projections
from .state import RunRecord
from .statistics import (
    AnalysisSettings,
    HumanAgreement,
    HumanBias,
    RunKind,
    human_agreement_rows,
)

__all__ = [
    "REVIEW_KEY",
    "RaterFrames",
    "ReviewItem",
    "agreement_by_runs",
    "human_validity",
    "rater_frames",
    "review_queue",
]

REVIEW_KEY = "review-queue"
"""The name of the deployment secret that keys review queues (`deployment_secret`)."""

_RATER = {
    "task_id": pl.String,
    "run_id": pl.String,
    "rater_id": pl.String,
    "dimension": pl.String,
    "score": pl.Float64,
}


class RaterFrames(NamedTuple):
    """The LLM judges' and the humans' ratings of one campaign, in `RATER_SCHEMA`."""

    judges: pl.DataFrame
    humans: pl.DataFrame


def rater_frames(p: Projections, campaign: str) -> RaterFrames:
    """Ratings of the campaign's latest run attempts: each LLM judge's (every sample) and
    each reviewer's, one row per run × rater × dimension."""
    runs = p.table("runs").filter((pl.col("campaign_id") == campaign) & ~pl.col("superseded"))
    judged = p.table("judgments").filter(
        (pl.col("campaign_id") == campaign) & (pl.col("judge_id") != RULES_JUDGE_ID)
    )
    judges = judged.join(runs.select("run_id"), on="run_id", how="semi").select(
        "task_id",
        "run_id",
        pl.col("judge_id").alias("rater_id"),
        "dimension",
        pl.col("score").cast(pl.Float64),
    )
    latest = set(runs["run_id"].to_list())
    rows = [
        (p.state.runs[v.run_id].task_id, v.run_id, v.judge_id, dim, float(score))
        for _, v in sorted(p.state.human_verdicts.items())
        if v.campaign_id == campaign and v.run_id in latest
        for dim, score in sorted(v.scores.items())
    ]
    humans = pl.DataFrame(rows, schema=_RATER, orient="row")
    return RaterFrames(judges, humans)


def human_validity(
    p: Projections, campaign: str, settings: AnalysisSettings
) -> tuple[tuple[HumanAgreement, ...], tuple[HumanBias, ...]]:
    """Each LLM judge's, the jury's and human-human agreement and bias against the
    campaign's human verdicts (no rows before the first one)."""
    return agreement_by_runs(rater_frames(p, campaign), p.control_runs(), settings)


def agreement_by_runs(
    raters: RaterFrames, control_runs: list[str], settings: AnalysisSettings
) -> tuple[tuple[HumanAgreement, ...], tuple[HumanBias, ...]]:
    """Agreement with humans on agents' runs and on control runs apart: controls are mostly
    known-bad, so a κ over both mixes two populations and describes neither."""
    agreement: list[HumanAgreement] = []
    bias: list[HumanBias] = []
    is_control = pl.col("run_id").is_in(control_runs)
    kinds: tuple[tuple[RunKind, pl.Expr], ...] = (("agents", ~is_control), ("controls", is_control))
    for kind, keep in kinds:
        judges, humans = raters.judges.filter(keep), raters.humans.filter(keep)
        if judges.height and humans.height:
            a, b = human_agreement_rows(judges, humans, settings, runs=kind)
            agreement += a
            bias += b
    return tuple(agreement), tuple(bias)


class ReviewItem(NamedTuple):
    """One run in a reviewer's queue: what a blind reviewer may see of it."""

    position: int
    run_id: str
    task_id: str


def _rank(key: bytes, reviewer: str, name: str) -> str:
    text = f"assay-review\x1f{reviewer}\x1f{name}".encode()
    return hmac.new(key, text, hashlib.sha256).hexdigest()


def review_queue(p: Projections, campaign: str, reviewer: str, *, key: bytes) -> list[ReviewItem]:
    """The sealed, latest-attempt runs of a campaign that `reviewer` (a judge id,
    ``reviewer-<name>``) has not graded, in the reviewer's own random order (keyed by
    `key`, the deployment's `REVIEW_KEY`), controls and agents' runs alike; of runs that
    did the same work (`RunRecord.work_sha256`), the first only, and none whose work the
    reviewer graded already."""
    if len(key) < 16:
        raise ValueError("a review queue's key has at least 16 bytes")
    if not is_reviewer_id(reviewer):
        raise ValueError(f"not a reviewer's judge id: {reviewer!r}")
    graded = {v.run_id for v in p.state.human_verdicts.values() if v.judge_id == reviewer}
    seen = {p.state.runs[r].work_sha256 for r in graded if r in p.state.runs}
    latest = set(
        p.table("runs")
        .filter((pl.col("campaign_id") == campaign) & ~pl.col("superseded"))["run_id"]
        .to_list()
    )
    runs: list[RunRecord] = [
        run
        for run in p.state.runs.values()
        if run.run_id in latest and run.sealed and run.run_id not in graded
    ]
    runs.sort(key=lambda r: _rank(key, reviewer, r.run_id))
    queue: list[RunRecord] = []
    for run in runs:  # the same work once: a control's epochs leave the same each time
        if run.work_sha256 not in seen:
            seen.add(run.work_sha256)
            queue.append(run)
    return [ReviewItem(i, r.run_id, r.task_id) for i, r in enumerate(queue, start=1)]
