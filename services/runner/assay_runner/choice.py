"""Which of its task's plans a control plays: chosen at its first step (issue #47).

The submitter declares a task's controls before any run exists, each a variant for a
control agent that wears one of the campaign's agents. Played as declared, a control
agent plays every kind of work in turn across the tasks, so it wears a model that never
does some of them (a model that never writes a file, "writing" the reference's): the pair
of who the run looks like and what it left tells it apart. Where its declaration says it
`chooses`, the runner, which has seen the agents' runs, picks instead the plan whose kind
of work (:class:`~assay_runner.book.Work`) its look-alike did, in proportion to how often
it did it on tasks like this one; before any such run is known, every kind alike. The
choice is sealed into the run's first step (`assay.security.controls`), where the
aggregator reads it back: the run is labelled by the plan it played.
"""

from __future__ import annotations

import hashlib
import hmac
import random
from collections import Counter
from collections.abc import Mapping, Sequence

from assay_schemas import ControlDetails

from .book import Work

__all__ = ["PRIOR_RUNS", "choose_plan", "plan_weights", "playing"]

PRIOR_RUNS = 1.0
"""The weight of the even prior, in runs: after n of its look-alike's runs, a kind of work
the look-alike never did keeps 1/(n+1) of the draws between them (so no kind's figures
go unmeasured only because one agent never does it)."""


def _plans(
    control: ControlDetails, declared: Sequence[ControlDetails]
) -> dict[str, ControlDetails]:
    """The task's distinct plans, each with the first declaration of it (log order)."""
    out: dict[str, ControlDetails] = {}
    for d in declared:
        if (d.campaign_id, d.task_id) == (control.campaign_id, control.task_id):
            out.setdefault(d.plan_sha256, d)
    return out


def plan_weights(works: Mapping[str, Work], seen: Counter[Work]) -> dict[str, float]:
    """Each plan's chance: its kind of work's share of the look-alike's runs of the kinds
    on offer (`seen`), smoothed by `PRIOR_RUNS` spread evenly over them, split evenly
    between the plans of that kind."""
    kinds = Counter(works.values())
    n = sum(seen[k] for k in kinds)
    share = {k: (seen[k] + PRIOR_RUNS / len(kinds)) / (n + PRIOR_RUNS) for k in kinds}
    return {plan: share[work] / kinds[work] for plan, work in works.items()}


def choose_plan(
    control: ControlDetails,
    declared: Sequence[ControlDetails],
    works: Mapping[str, Work],
    seen: Counter[Work],
    *,
    key: bytes,
    run_id: str,
) -> ControlDetails:
    """The declaration the run plays: `control` itself unless it `chooses`; else one of
    its task's plans whose kind of work is known (`works`: plan -> kind), drawn by
    `plan_weights` from the look-alike's runs (`seen`), the draw keyed by `key` (the
    deployment's controls secret) and the run, so a rerun of the same choice draws alike."""
    if not control.chooses:
        return control
    plans = {p: d for p, d in _plans(control, declared).items() if p in works}
    if control.plan_sha256 not in plans or len(plans) < 2:
        return control
    weights = plan_weights({p: works[p] for p in plans}, seen)
    order = sorted(weights)
    seed = hmac.new(key, f"assay-choice\x1f{run_id}".encode(), hashlib.sha256).digest()
    plan = random.Random(seed).choices(order, [weights[p] for p in order])[0]
    return playing(control, plans[plan])


def playing(control: ControlDetails, plan: ControlDetails) -> ControlDetails:
    """`control` (its run, agent, epoch, slot) playing the plan another declaration of its
    task declares (its plan, variant, expectation and steps)."""
    return control.model_copy(
        update={
            "plan_sha256": plan.plan_sha256,
            "variant": plan.variant,
            "folder": plan.folder,
            "expected": plan.expected,
            "max_steps": plan.max_steps,
        }
    )
