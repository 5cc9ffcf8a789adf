"""Who took part, as the report describes them: the campaigns, agents and judges as folded,
with how much each ran or judged."""

from __future__ import annotations

import polars as pl

from assay_schemas import RULES_JUDGE_ID

from .projections import Projections
from .statistics import Row, StatisticsReport, binomial_interval

__all__ = ["AgentInfo", "CampaignInfo", "JudgeInfo"]


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


class AgentInfo(Row):
    """An agent declared by a campaign (or seen in its runs), with how many runs it has."""

    agent_id: str
    family: str
    model: str
    n_runs: int
    n_scored: int
    """Runs with ratings that are not infrastructure failures."""
    n_infrastructure_failures: int


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
    n_repaired: int
    """Verdicts accepted only after at least one rejected output."""
    repair_rate: float
    """n_repaired / n_verdicts (NaN without verdicts)."""
    repair_ci_low: float
    """Wilson's interval of the repair rate at n_repaired of n_verdicts (Clopper–Pearson's
    at 0 or n; NaN without verdicts)."""
    repair_ci_high: float
    failure_rate: float
    """n_failures / (n_verdicts + n_failures) (NaN without either)."""
    failure_ci_low: float
    """Wilson's interval of the failure rate at n_failures of n_verdicts + n_failures
    (Clopper–Pearson's at 0 or n; NaN without either)."""
    failure_ci_high: float


def _campaigns(p: Projections, ids: list[str]) -> tuple[CampaignInfo, ...]:
    runs = p.table("runs")
    out = []
    for cid in ids:
        spec = p.state.campaigns.get(cid, {})
        # Control agents (opaque ids, one per control) are no agents of the campaign.
        mine = runs.filter(
            (pl.col("campaign_id") == cid) & ~pl.col("run_id").is_in(p.control_runs())
        )
        rubric = spec.get("rubric", {})
        out.append(
            CampaignInfo(
                campaign_id=cid,
                name=spec.get("name", ""),
                scripted=bool(spec.get("scripted", False)),
                epochs=int(spec.get("epochs", 1)),
                n_tasks=mine["task_id"].n_unique(),
                n_agents=len(
                    {a["agent_id"] for a in spec.get("agents", [])}
                    | set(mine["agent_id"].to_list())
                ),
                rubric_id=rubric.get("rubric_id", ""),
                rubric_version=int(rubric.get("version", 0)),
            )
        )
    return tuple(out)


def _judges(p: Projections, ids: list[str], confidence: float) -> tuple[JudgeInfo, ...]:
    agents_runs = pl.col("campaign_id").is_in(ids) & ~pl.col("run_id").is_in(p.control_runs())
    verdicts = p.table("verdicts").filter(agents_runs)
    failures = p.table("judgment_failures").filter(agents_runs)
    out = []
    for j in sorted(p.state.judges.values(), key=lambda j: j.judge_id):
        mine = verdicts.filter(pl.col("judge_id") == j.judge_id)
        if not set(j.campaigns) & set(ids) and mine.height == 0:
            continue
        n, failed = mine.height, failures.filter(pl.col("judge_id") == j.judge_id).height
        repaired = int((mine["attempts"] > 1).sum())
        repair = binomial_interval(repaired, n, confidence)
        failure = binomial_interval(failed, n + failed, confidence)
        out.append(
            JudgeInfo(
                judge_id=j.judge_id,
                kind="rules" if j.judge_id == RULES_JUDGE_ID else "llm",
                family=j.family,
                model=j.model,
                n_verdicts=n,
                n_runs=mine["run_id"].n_unique(),
                n_failures=failed,
                n_repaired=repaired,
                repair_rate=repaired / n if n else float("nan"),
                repair_ci_low=float(repair.low),
                repair_ci_high=float(repair.high),
                failure_rate=failed / (n + failed) if n + failed else float("nan"),
                failure_ci_low=float(failure.low),
                failure_ci_high=float(failure.high),
            )
        )
    return tuple(out)


def _declared(p: Projections, ids: list[str], kind: str) -> tuple[str, ...]:
    """Ids of the agents or judges the campaigns declare."""
    out = {
        item[f"{kind}_id"]
        for cid in ids
        for item in p.state.campaigns.get(cid, {}).get(f"{kind}s", [])
    }
    return tuple(sorted(out))


def _agents(p: Projections, ids: list[str], stats: StatisticsReport) -> tuple[AgentInfo, ...]:
    runs = p.table("runs").filter(
        pl.col("campaign_id").is_in(ids) & ~pl.col("run_id").is_in(p.control_runs())
    )
    specs = {
        a["agent_id"]: a for cid in ids for a in p.state.campaigns.get(cid, {}).get("agents", [])
    }
    scored: dict[str, int] = {}
    for r in stats.run_accounting:
        scored[r.agent_id] = scored.get(r.agent_id, 0) + r.n_scored
    out = []
    for agent in sorted(set(specs) | set(runs["agent_id"].to_list()) - {""}):
        mine = runs.filter(pl.col("agent_id") == agent)
        spec = specs.get(agent, {})
        out.append(
            AgentInfo(
                agent_id=agent,
                family=str(spec.get("family", "")) or (mine["agent_family"].first() or ""),
                model=str(spec.get("model", "")) or (mine["agent_model"].first() or ""),
                n_runs=mine.height,
                n_scored=scored.get(agent, 0),
                n_infrastructure_failures=int(mine["infrastructure_failure"].sum()),
            )
        )
    return tuple(out)
