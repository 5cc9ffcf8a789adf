"""Synthetic campaigns with planted effects, for tests and benchmarks.

Each rating is ``clip(round(latent), 0, 10)`` with latent = base + agent skill + task
difficulty + run noise + judge leniency + (self-preference if the judge shares the
agent's family) ± half the planted communication gap on those two dimensions + rating
noise. Base and spreads keep latents mostly inside 0-10, so rounding and clipping bend
planted effects only a little.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from assay_report.statistics._tables import Tables, make_tables
from assay_schemas import default_rubric

__all__ = ["RUBRIC_DIMENSIONS", "synthetic_tables"]

RUBRIC_DIMENSIONS: tuple[str, ...] = tuple(d.key for d in default_rubric().dimensions)
"""The default rubric's dimension keys."""

_DEFAULT_JUDGES = (("judge_a", "fam_a"), ("judge_b", "fam_b"), ("judge_c", "fam_c"))


def synthetic_tables(
    *,
    n_tasks: int = 178,
    n_agents: int = 9,
    n_epochs: int = 1,
    n_samples: int = 1,
    judges: Sequence[tuple[str, str]] = _DEFAULT_JUDGES,
    agent_families: Sequence[str] | None = None,
    dimensions: Sequence[str] = RUBRIC_DIMENSIONS,
    base: float = 6.0,
    agent_skill: Sequence[float] | None = None,
    judge_leniency: Mapping[str, float] | None = None,
    self_preference: Mapping[str, float] | None = None,
    communication_gap: Mapping[str, float] | None = None,
    overclaim_rate: Mapping[str, float] | None = None,
    task_sd: float = 1.0,
    run_sd: float = 0.5,
    rating_sd: float = 0.8,
    infrastructure_failure_rate: float = 0.0,
    empty_artifact_rate: float = 0.05,
    campaign_id: str = "campaign-1",
    seed: int = 0,
) -> Tables:
    """A campaign of ``n_tasks × n_agents × n_epochs`` runs judged by ``judges``.

    Agents are ``agent_0 …``; their families default to the judges' families in turn
    (so each judge family has own-family agents). Maps are keyed by judge or agent id.
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    agents = [f"agent_{i}" for i in range(n_agents)]
    jfams = [f for _, f in judges]
    afams = list(agent_families or [jfams[i % len(jfams)] for i in range(n_agents)])
    skill = np.asarray(agent_skill if agent_skill is not None else np.linspace(-1, 1, n_agents))
    tasks = [f"task_{t:04d}" for t in range(n_tasks)]
    difficulty = rng.normal(0.0, task_sd, n_tasks)

    t, a, e = (
        g.ravel()
        for g in np.meshgrid(
            np.arange(n_tasks), np.arange(n_agents), np.arange(n_epochs), indexing="ij"
        )
    )
    n_runs = t.size
    run_ids = [f"run_{i:06d}" for i in range(n_runs)]
    run_effect = rng.normal(0.0, run_sd, n_runs)
    infra = rng.random(n_runs) < infrastructure_failure_rate
    empty = rng.random(n_runs) < empty_artifact_rate
    domains = np.array(["biology", "chemistry", "physics"])[np.arange(n_tasks) % 3]
    phases = np.array(["analysis", "design"])[np.arange(n_tasks) % 2]
    levels = np.array(["easy", "medium", "hard", ""])[np.arange(n_tasks) % 4]

    runs = pl.DataFrame(
        {
            "campaign_id": [campaign_id] * n_runs,
            "task_id": np.array(tasks)[t],
            "run_id": run_ids,
            "agent_id": np.array(agents)[a],
            "agent_family": np.array(afams)[a],
            "epoch": e.astype(np.int64),
            "domain": domains[t],
            "phase": phases[t],
            "difficulty": levels[t],
            "state": np.where(infra, "failed", "judged"),
            "infrastructure_failure": infra,
            "empty_artifacts": empty,
            "latency_s": rng.lognormal(4.0, 0.5, n_runs),
            "cost_usd": rng.lognormal(-1.0, 0.7, n_runs),
            "steps": rng.integers(5, 60, n_runs),
            "input_tokens": rng.integers(10_000, 200_000, n_runs),
            "output_tokens": rng.integers(500, 20_000, n_runs),
            "cached_tokens": rng.integers(0, 10_000, n_runs),
        }
    )

    # Ratings: every (run, judge, sample, dimension) of runs that did not fail.
    ok = np.flatnonzero(~infra)
    j_n, s_n, d_n = len(judges), n_samples, len(dimensions)
    r, j, s, d = (
        g.ravel()
        for g in np.meshgrid(ok, np.arange(j_n), np.arange(s_n), np.arange(d_n), indexing="ij")
    )
    lenient = np.array([(judge_leniency or {}).get(jid, 0.0) for jid, _ in judges])
    selfp = np.array([(self_preference or {}).get(jid, 0.0) for jid, _ in judges])
    gap = np.array([(communication_gap or {}).get(ag, 0.0) for ag in agents])
    own = np.array(jfams)[j] == np.array(afams)[a[r]]
    dims = np.array(dimensions)
    shift = np.where(dims[d] == "communication", 0.5, 0.0) - np.where(
        dims[d] == "scientific_accuracy", 0.5, 0.0
    )
    latent = (
        base
        + skill[a[r]]
        - difficulty[t[r]]
        + run_effect[r]
        + lenient[j]
        + selfp[j] * own
        + shift * gap[a[r]]
        + rng.normal(0.0, rating_sd, r.size)
    )
    score = np.clip(np.rint(latent), 0, 10).astype(np.int64)
    ratings = pl.DataFrame(
        {
            "campaign_id": [campaign_id] * r.size,
            "task_id": np.array(tasks)[t[r]],
            "run_id": np.array(run_ids)[r],
            "agent_id": np.array(agents)[a[r]],
            "agent_family": np.array(afams)[a[r]],
            "epoch": e[r].astype(np.int64),
            "judge_id": np.array([jid for jid, _ in judges])[j],
            "judge_family": np.array(jfams)[j],
            "sample": s.astype(np.int64),
            "dimension": dims[d],
            "score": score,
            "domain": domains[t[r]],
            "phase": phases[t[r]],
            "difficulty": levels[t[r]],
        }
    )

    # Tags: one draw per verdict (run × judge × sample).
    vr, vj, vs = (g.ravel() for g in np.meshgrid(ok, np.arange(j_n), np.arange(s_n), indexing="ij"))
    p_over = np.array([(overclaim_rate or {}).get(ag, 0.1) for ag in agents])[a[vr]]
    over = rng.random(vr.size) < p_over
    none = empty[vr]
    tag_r = np.concatenate([vr[over], vr[none]])
    tag_j = np.concatenate([vj[over], vj[none]])
    tag_s = np.concatenate([vs[over], vs[none]])
    tag_name = ["overclaiming"] * int(over.sum()) + ["no_artifacts"] * int(none.sum())
    tags = pl.DataFrame(
        {
            "campaign_id": [campaign_id] * tag_r.size,
            "task_id": np.array(tasks, dtype=object)[t[tag_r]].astype(str),
            "run_id": np.array(run_ids, dtype=object)[tag_r].astype(str),
            "agent_id": np.array(agents, dtype=object)[a[tag_r]].astype(str),
            "judge_id": np.array([jid for jid, _ in judges], dtype=object)[tag_j].astype(str),
            "sample": tag_s.astype(np.int64),
            "tag": pl.Series(tag_name, dtype=pl.String),
        }
    )
    return make_tables(ratings, runs, tags)
