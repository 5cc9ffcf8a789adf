"""The report: a pure function of the projections, serialized canonically.

``build_report`` runs the statistics library on the projection's tables: the rated
statistics with the bootstrap seed derived from the campaign ids (``report_seed``), and
the plain counts (run states, infrastructure failures, the rule judge's reference checks
and tags). The rated statistics count the campaigns' declared juries; judges that joined
late are named apart, with every statistic again counting them too (`late_judges`). It adds only what describes the log itself: the campaigns and judges as
folded, and a banner when a campaign is scripted. Nothing here reads a clock, so
replaying the log rebuilds the same ``report_json`` bytes.
"""

from __future__ import annotations

import hashlib

import polars as pl
from pydantic import BaseModel, ConfigDict

from assay.heap import collector_paused
from assay_schemas import RULES_JUDGE_ID, Price, Problems, parse_event_subject, problems_of

from .canonical import canonical_json
from .late_judges import LateJudge, late_judges
from .participants import (
    AgentInfo,
    CampaignInfo,
    JudgeInfo,
    _agents,
    _campaigns,
    _declared,
    _judges,
)
from .projections import Projections
from .prompt_cache import PromptCacheUse, prompt_cache_rows
from .statistics import (
    ANCHOR,
    DEFAULT_RESAMPLES,
    USED_MODELS_SCHEMA,
    AnalysisSettings,
    InfrastructureFailures,
    JudgeCost,
    ReferenceCheckCell,
    ReferenceCheckRate,
    Row,
    RuleTagRate,
    RunStateCount,
    StatisticsReport,
    TaskAttribute,
    compute_statistics,
    frames_of,
    judge_cost_rows,
    plain_counts,
    unpriced_models,
)
from .stopping import AnytimeInterval, CampaignStopping, stopping_rows
from .validity import JudgeValidity, judge_validity

__all__ = [
    "REPORT_FORMAT",
    "AgentInfo",
    "CampaignInfo",
    "JudgeInfo",
    "LateJudge",
    "RefusedMessage",
    "Report",
    "build_report",
    "cached_answers_line",
    "report_frames",
    "report_json",
    "report_seed",
]

REPORT_FORMAT = 1


class RefusedMessage(Row):
    """A stored message that reached no figure: undecodable, forged, or a repeated verdict."""

    sequence: int
    subject: str
    reason: str


class Report(BaseModel):
    """Everything `assay report` shows, rebuilt from the log alone."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    format: int = REPORT_FORMAT
    campaigns: tuple[CampaignInfo, ...]
    scripted: bool
    """Show a 'scripted campaign' banner: some campaign used scripted stand-ins."""
    cached_answers: int = 0
    """Agent steps answered from the development cache (``cache:``), not by the model:
    shown at the top, as the runs they are in repeat earlier answers."""
    cached_verdicts: int = 0
    """Judge samples (verdicts) whose every model answer came from the development cache:
    shown at the top beside `cached_answers`, as they repeat earlier verdicts."""
    log_sequence: int
    """Last stream sequence folded into the projections."""
    group_by: str | None
    anchor: int
    """Pass threshold: the rubric's ``pass_threshold`` (the first campaign's)."""
    agents: tuple[AgentInfo, ...]
    """Every declared agent, also those without a scored run."""
    judges: tuple[JudgeInfo, ...]
    run_states: tuple[RunStateCount, ...]
    infrastructure_failures: tuple[InfrastructureFailures, ...]
    judge_costs: tuple[JudgeCost, ...]
    """Tokens and cost per verdict of each LLM judge."""
    reference_checks: tuple[ReferenceCheckRate, ...]
    """The task's own reference checks (the rule judge runs them)."""
    rule_checks: tuple[ReferenceCheckRate, ...]
    """The rule judge's built-in checks (artifacts present, claimed files exist, ...)."""
    reference_check_matrix: tuple[ReferenceCheckCell, ...]
    """Task × agent reference-check results, with each failed check and its detail."""
    rule_tags: tuple[RuleTagRate, ...]
    trust_root: str
    """Operator key every counted event's signature was checked against ('' = not checked)."""
    refused: tuple[RefusedMessage, ...]
    """Messages of the report's campaigns (or undecodable ones) that count for nothing."""
    statistics: StatisticsReport
    problems: Problems
    """What did not go as planned: failures by cause, runs and verdicts never in."""
    validity: JudgeValidity | None = None
    """Judge validity (controls, human verdicts); None when the campaigns have neither."""
    late_judges: tuple[LateJudge, ...] = ()
    """Judges that joined a campaign its declared jury does not name: `statistics` leaves
    their verdicts out (the headline is the declared jury's)."""
    with_late_judges: StatisticsReport | None = None
    """Every statistic with the late judges' verdicts counted too; None without any."""
    prompt_cache: tuple[PromptCacheUse, ...] = ()
    """Each agent's and judge's cached share of input tokens and what caching saved."""
    stopping: tuple[CampaignStopping, ...] = ()
    """Campaigns that declared ``stopping:``: when and why they stopped, runs and cost saved."""
    anytime_intervals: tuple[AnytimeInterval, ...] = ()
    """The anytime-valid intervals each stopping rule read when it decided (labelled)."""


def cached_answers_line(agents: int, judges: int = 0) -> str:
    """The warning at the top of a report with answers from the development cache:
    agents' steps and judges' verdicts, counted apart."""
    answers = "answer" if agents == 1 else "answers"
    verdicts = "verdict" if judges == 1 else "verdicts"
    return (
        f"DEVELOPMENT CACHE: {agents} agent model {answers} and {judges} judge {verdicts} "
        "came from the local cache (cache:), not from the models; they are marked "
        "cached_answer in the log."
    )


def report_seed(campaign_ids: list[str]) -> int:
    """Bootstrap seed: the first 8 bytes of sha256 over the sorted campaign ids."""
    text = "assay-report\x1f" + "\x1f".join(sorted(campaign_ids))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def _tasks_without_checks(p: Projections, ids: list[str]) -> tuple[str, ...]:
    tasks = p.table("tasks").filter(
        pl.col("campaign_id").is_in(ids) & (pl.col("n_reference_checks") == 0)
    )
    return tuple(sorted(set(tasks["task_id"].to_list())))


def _unpriced_models(p: Projections, ids: list[str]) -> dict[str, tuple[str, ...]]:
    """Models of non-scripted campaigns logged at $0 for want of a price (scripted
    stand-ins are served by the scripted server: nothing is billed, 0 is their cost)."""
    real = [c for c in ids if not p.state.campaigns.get(c, {}).get("scripted", False)]
    tokens = pl.col("input_tokens") + pl.col("output_tokens")
    runs = p.table("runs").filter(pl.col("campaign_id").is_in(real))
    verdicts = p.table("verdicts").filter(
        pl.col("campaign_id").is_in(real) & (pl.col("judge_id") != RULES_JUDGE_ID)
    )
    judges = p.table("judges").select("judge_id", "model")
    used = pl.concat(
        [
            runs.select(
                "campaign_id",
                role=pl.lit("agent"),
                model="agent_model",
                tokens=tokens,
                cost_usd="cost_usd",
            ),
            verdicts.join(judges, on="judge_id", how="left").select(
                "campaign_id",
                role=pl.lit("judge"),
                model=pl.col("model").fill_null(""),
                tokens=tokens,
                cost_usd="cost_usd",
            ),
        ]
    )
    pinned = {
        c: {m: Price.model_validate(v) for m, v in p.state.campaigns[c].get("prices", {}).items()}
        for c in real
        if c in p.state.campaigns
    }
    return unpriced_models(used.cast(USED_MODELS_SCHEMA), pinned)


def rubric_anchor(p: Projections, ids: list[str]) -> int:
    """The pass threshold of the first campaign's rubric (the default anchor without one)."""
    for cid in ids:
        rubric = p.state.campaigns.get(cid, {}).get("rubric")
        if rubric and "pass_threshold" in rubric:
            return int(rubric["pass_threshold"])
    return ANCHOR


def build_report(
    p: Projections,
    *,
    campaign: str | None = None,
    group_by: TaskAttribute | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    anchor: int | None = None,
) -> Report:
    """The report of one campaign (or of every campaign in the log when None).

    The anchor defaults to the rubric's pass threshold, as in `assay audit`. The cycle
    collector is paused meanwhile: the report's allocations would set off a pass over the
    whole folded state (half a second at 10x), and it makes no garbage cycles.
    """
    with collector_paused():
        return _build_report(p, campaign, group_by, n_resamples, anchor)


def _build_report(
    p: Projections,
    campaign: str | None,
    group_by: TaskAttribute | None,
    n_resamples: int,
    anchor: int | None,
) -> Report:
    known = sorted(set(p.state.campaigns) | set(p.table("runs")["campaign_id"].to_list()))
    ids = [campaign] if campaign is not None else known
    anchor = rubric_anchor(p, ids) if anchor is None else anchor
    late = late_judges(p, ids)
    analysis = AnalysisSettings(
        seed=report_seed(ids), n_resamples=n_resamples, group_by=group_by, anchor=anchor
    )

    def statistics(leave_out: set[tuple[str, str]]) -> StatisticsReport:
        return compute_statistics(
            p.statistics_tables(ids, leave_out=leave_out),
            analysis,
            declared_agents=_declared(p, ids, "agent"),
            declared_judges=_declared(p, ids, "judge"),
            tasks_without_checks=_tasks_without_checks(p, ids),
            unpriced_models=_unpriced_models(p, ids),
        )

    stats = statistics({(j.campaign_id, j.judge_id) for j in late})
    counts = p.count_tables(ids)
    campaigns = _campaigns(p, ids)
    settings = AnalysisSettings(seed=report_seed(ids), n_resamples=n_resamples, anchor=anchor)
    stopping, anytime = stopping_rows(p, ids)
    return Report(
        campaigns=campaigns,
        scripted=any(c.scripted for c in campaigns),
        cached_answers=sum(r.cached_steps for r in p.state.runs.values() if r.campaign_id in ids),
        cached_verdicts=sum(v.cached for v in p.state.verdicts.values() if v.campaign_id in ids),
        log_sequence=p.state.last_sequence,
        group_by=group_by,
        anchor=anchor,
        agents=_agents(p, ids, stats),
        judges=_judges(p, ids, settings.confidence),
        judge_costs=judge_cost_rows(
            p.table("verdicts").filter(
                pl.col("campaign_id").is_in(ids) & (pl.col("judge_id") != RULES_JUDGE_ID)
            )
        ),
        **plain_counts(counts, group_by=group_by, confidence=settings.confidence)._asdict(),
        trust_root=p.state.trust_root,
        refused=_refused(p, {c.campaign_id for c in campaigns}),
        statistics=stats,
        problems=problems_of(p.state.histories[c] for c in ids if c in p.state.histories),
        validity=judge_validity(p, ids, settings),
        late_judges=late,
        with_late_judges=statistics(set()) if late else None,
        prompt_cache=prompt_cache_rows(p.state, ids),
        stopping=stopping,
        anytime_intervals=anytime,
    )


def _refused(p: Projections, campaigns: set[str]) -> tuple[RefusedMessage, ...]:
    """Refusals on the report's campaigns' subjects, and those whose campaign is unknown."""
    out = []
    for r in sorted(p.state.refused.values(), key=lambda r: r.sequence):
        tokens = parse_event_subject(r.subject)
        campaign = tokens.campaign_id if tokens is not None else None
        if campaign is None or campaign in campaigns:
            out.append(RefusedMessage(sequence=r.sequence, subject=r.subject, reason=r.reason))
    return tuple(out)


def report_json(report: Report) -> bytes:
    """The report as canonical JSON bytes (the unit of `assay replay --verify`)."""
    with collector_paused():
        return canonical_json(report)


def report_frames(report: Report) -> dict[str, pl.DataFrame]:
    """Every table of the report as a polars frame (statistics and the added sections)."""
    validity = frames_of(report.validity) if report.validity is not None else {}
    late = frames_of(report.with_late_judges) if report.with_late_judges is not None else {}
    return {
        **frames_of(report.statistics),
        **frames_of(report),
        **{f"validity_{k}": v for k, v in validity.items()},
        **{f"with_late_judges_{k}": v for k, v in late.items()},
    }
