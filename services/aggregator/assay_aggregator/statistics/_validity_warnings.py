"""Warnings on the validity figures: too few controls or human verdicts, undefined κ or
correction. Computed from the rows themselves (which carry their counts and NaNs), in
the package's warning style; thresholds are in ``_validity_rows``."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ._results import StatisticsWarning
from ._validity_rows import (
    MIN_CONTROL_RUNS,
    MIN_CONTROL_TASKS,
    MIN_HUMAN_RUNS,
    MIN_HUMAN_TASKS,
    ControlRate,
    CorrectedPassShare,
    HumanAgreement,
)
from ._warnings import _warn

__all__ = ["validity_warnings"]

_CORRECTED = ("corrected_pass_shares",)
_HUMAN = ("human_agreement", "human_bias")


def _judge(judge_id: str | None) -> str:
    return "the jury's mean" if judge_id is None else f"judge {judge_id}"


def _controls(rows: Sequence[ControlRate]) -> list[StatisticsWarning]:
    out = []
    for r in rows:
        if r.n_runs >= MIN_CONTROL_RUNS and r.n_tasks >= MIN_CONTROL_TASKS:
            continue
        which = f"{r.measure} of {_judge(r.judge_id)}" + (f" on variant {r.variant}" if r.variant else "")  # fmt: skip
        out.append(_warn(None, "few_controls", r.judge_id or "", f"the {which} rests on "
                         f"{r.n_runs} control run(s) in {r.n_tasks} task(s), fewer than "
                         f"{MIN_CONTROL_RUNS} runs or {MIN_CONTROL_TASKS} tasks",
                         ("control_rates", *_CORRECTED)))  # fmt: skip
    return out


def _correction(rows: Sequence[CorrectedPassShare]) -> list[StatisticsWarning]:
    out = []
    done: set[str | None] = set()
    for r in rows:
        se, sp = r.sensitivity, r.specificity
        if math.isnan(r.unclipped) and r.judge_id not in done:
            done.add(r.judge_id)
            cause = (
                "there is no known-good control (no sensitivity)"
                if math.isnan(se)
                else "there is no known-bad control (no specificity)"
                if math.isnan(sp)
                else f"Se + Sp = {se:.3f} + {sp:.3f} ≤ 1: the judge's verdicts carry no "
                "information on the runs' quality"
            )
            out.append(_warn(None, "correction_undefined", r.judge_id or "", "the corrected pass "
                             f"share from {_judge(r.judge_id)} is undefined: {cause}",
                             _CORRECTED))  # fmt: skip
        elif not 0.0 <= r.unclipped <= 1.0 and not math.isnan(r.unclipped):
            out.append(_warn(None, "correction_clipped", r.agent_id, f"the corrected pass share "
                             f"of agent {r.agent_id} from {_judge(r.judge_id)} "
                             f"({r.unclipped:.3f}) lies outside [0, 1] and "
                             "is clipped: the raw share and the error rates disagree",
                             _CORRECTED))  # fmt: skip
        if r.undefined_resamples and not math.isnan(r.unclipped):
            out.append(_warn(None, "correction_resamples_undefined", r.agent_id,
                             f"{r.undefined_resamples} resamples have Se + Sp ≤ 1 and are left "
                             f"out of the interval of agent {r.agent_id}'s corrected pass share "
                             f"from {_judge(r.judge_id)}",
                             _CORRECTED))  # fmt: skip
    return out


def _human(rows: Sequence[HumanAgreement]) -> list[StatisticsWarning]:
    out = []
    for r in rows:
        who = {"judge": f"judge {r.subject}", "jury": "the jury's mean",
               "humans": "human with human"}[r.subject_kind]  # fmt: skip
        if r.n_runs < MIN_HUMAN_RUNS or r.n_tasks < MIN_HUMAN_TASKS:
            out.append(_warn(None, "few_human_verdicts", r.subject, f"agreement of {who} rests "
                             f"on {r.n_runs} verdict pair(s) in {r.n_tasks} task(s), fewer than "
                             f"{MIN_HUMAN_RUNS} pairs or {MIN_HUMAN_TASKS} tasks", _HUMAN))  # fmt: skip
        if math.isnan(r.kappa) or math.isnan(r.weighted_kappa):
            out.append(_warn(None, "kappa_undefined", r.subject, f"Cohen's κ of {who} is "
                             "undefined: both sides give one class only (all pass or all "
                             "fail, or one score bin), so chance agreement is total",
                             ("human_agreement",)))  # fmt: skip
    return out


def validity_warnings(
    control_rates: Sequence[ControlRate] = (),
    corrected: Sequence[CorrectedPassShare] = (),
    agreement: Sequence[HumanAgreement] = (),
) -> list[StatisticsWarning]:
    """Every warning the validity rows call for, controls first, then correction, then humans."""
    return _controls(control_rates) + _correction(corrected) + _human(agreement)
