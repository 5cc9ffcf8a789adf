"""The judgments of one synthetic run: each judge's samples, scored by the log's model of
leniency, self-preference and the communication gap, and the rule judge's checks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from assay_schemas import (
    RULES_JUDGE_ID,
    AgentSpec,
    CheckResult,
    DimensionScore,
    Event,
    FileRef,
    JudgmentRecorded,
)

if TYPE_CHECKING:  # the generator imports this module
    from .synthetic_log import LogSpec, _Clock


def _judgments(
    spec: LogSpec,
    rng: np.random.Generator,
    clock: _Clock,
    agent: AgentSpec,
    latent: float,
    empty: bool,
    dims: list[str],
    files: list[FileRef],
    env: dict[str, Any],
    cause: str,
) -> Iterator[Event]:
    rid = env["run_id"]
    gap = spec.communication_gap.get(agent.agent_id, 0.0)
    paths = [f.path for f in files]
    for judge_id, family in spec.judges:
        for sample in range(spec.n_samples):
            shift = spec.judge_leniency.get(judge_id, 0.0)
            if family == agent.family:
                shift += spec.self_preference.get(judge_id, 0.0)
            scores: dict[str, DimensionScore] = {}
            for dim in dims:
                x = latent + shift + rng.normal(0.0, 0.8) - (3.0 if empty else 0.0)
                x += (
                    gap / 2
                    if dim == "communication"
                    else -gap / 2
                    if dim == "scientific_accuracy"
                    else 0.0
                )
                scores[dim] = DimensionScore(score=int(np.clip(np.rint(x), 0, 10)), reason="ok")
            tags = ["no_artifacts"] if empty else []
            if rng.random() < spec.overclaim_rate.get(agent.agent_id, 0.1):
                tags.insert(0, "overclaiming")
            yield JudgmentRecorded(
                event_id=JudgmentRecorded.id_for(rid, judge_id, sample),
                judge_id=judge_id,
                judge_family=family,
                judge_model=f"model-{judge_id}",
                sample=sample,
                rubric_id="assay-default",
                rubric_version=1,
                scores=scores,
                failure_tags=tags,
                rationale="Checked the report against results.csv.",
                files_cited=paths[-2:],
                files_opened=paths[-2:],
                causation_id=cause,
                occurred_at=clock(),
                **env,
            )
    if spec.rules:
        ok = not empty and bool(rng.random() < 0.5 + 0.1 * latent - 0.3)
        checks = [
            CheckResult(name="results_table", passed=not empty),
            CheckResult(name="estimate", passed=ok, detail="2.01 vs 2.0 ± 0.1", weight=2.0),
        ]
        tags = ["no_artifacts"] if empty else []
        if not empty and rng.random() < 0.05:
            tags.append("claimed_file_missing")
        yield JudgmentRecorded(
            event_id=JudgmentRecorded.id_for(rid, RULES_JUDGE_ID, 0),
            judge_id=RULES_JUDGE_ID,
            judge_family="rules",
            judge_model="rules",
            sample=0,
            rubric_id="assay-default",
            rubric_version=1,
            failure_tags=tags,
            checks=checks,
            causation_id=cause,
            occurred_at=clock(),
            **env,
        )
