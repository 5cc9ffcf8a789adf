"""Judges that joined a campaign late: not in the jury its `CampaignStarted` declared.

A judge added to a running or finished campaign (`assay serve judge`, `assay judge`,
`assay rejudge`) back-fills its sealed runs. Its verdicts are facts like any other, but
they were not part of the campaign as declared, so the report keeps the declared jury's
figures as the headline, names each late judge (when it joined, how many runs it judged,
how many of them it back-filled) and shows the scores with the late judges beside them.
A campaign that declares no judge has no headline jury: nothing is late there.
"""

from __future__ import annotations

import polars as pl

from assay_schemas import RULES_JUDGE_ID, is_reviewer_id

from .projections import Projections
from .statistics import Row

__all__ = ["LateJudge", "late_judges"]


class LateJudge(Row):
    """A judge of a campaign that the campaign's declared jury does not name."""

    campaign_id: str
    judge_id: str
    joined_at: str
    """When it joined: its first registration or verdict for the campaign (UTC, ISO 8601)."""
    joined_sequence: int
    """Where in the log it joined."""
    n_runs: int
    """Runs of the campaign with a verdict from it."""
    n_verdicts: int
    n_backfilled: int
    """Of those runs, the ones sealed before it joined."""


def late_judges(p: Projections, ids: list[str]) -> tuple[LateJudge, ...]:
    """The late judges of the campaigns `ids`, by campaign and judge."""
    verdicts = p.table("verdicts").filter(~pl.col("run_id").is_in(p.control_runs()))
    out = []
    for key, (sequence, at) in sorted(p.state.judge_joined.items()):
        campaign_id, judge_id = key.split("/", 1)
        declared = {j["judge_id"] for j in p.state.campaigns.get(campaign_id, {}).get("judges", [])}
        if campaign_id not in ids or not declared or judge_id in declared:
            continue
        if judge_id == RULES_JUDGE_ID or is_reviewer_id(judge_id):
            continue  # the rule judge and reviewers are never in a declared jury
        mine = verdicts.filter(
            (pl.col("campaign_id") == campaign_id) & (pl.col("judge_id") == judge_id)
        )
        runs = set(mine["run_id"].to_list())
        sealed = p.state.seal_sequence
        out.append(
            LateJudge(
                campaign_id=campaign_id,
                judge_id=judge_id,
                joined_at=at,
                joined_sequence=sequence,
                n_runs=len(runs),
                n_verdicts=mine.height,
                n_backfilled=sum(sealed.get(r, sequence) < sequence for r in runs),
            )
        )
    return tuple(out)
