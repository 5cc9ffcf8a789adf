"""Which of its task's plans a control plays: chosen at its first step (issue #47).

The submitter declares a task's controls before any run exists, each a variant for a
control agent that wears one of the campaign's agents. Played as declared, a control
agent plays every kind of work in turn across the tasks, so it wears a model that never
does some of them (a model that never writes a file, "writing" the reference's): the pair
of who the run looks like and what it left tells it apart. Where its declaration says it
`chooses`, the runner, which has seen the agents' runs, picks instead a plan whose kind of
work (:class:`~assay_runner.book.Work`) its look-alike did, in proportion to how often it
did it on tasks like this one (`kind_shares`); within a kind, the known-good plans take
half the draws (`plan_weights`). The choice is sealed into the run's first step
(`assay.security.controls`), where the aggregator reads it back: the run is labelled by
the plan it played.
"""

from __future__ import annotations

import hashlib
import hmac
import random
from collections import Counter
from collections.abc import Collection, Mapping, Sequence

from assay_schemas import ControlDetails

from .book import Work

__all__ = [
    "GOOD_SHARE",
    "choosable",
    "choose_plan",
    "kind_shares",
    "plan_weights",
    "playing",
    "weighs_kinds",
]

GOOD_SHARE = 0.5
"""The share of a kind's draws its known-good plans take, where it has known-bad ones too.
A task declares one known-good plan beside its variants: split evenly, the reference took
a third of the draws of the kind of work it shares with two of them, and a bundled
campaign of forty controls played it 3-8 times, in one CI run (2026-12-07) never, which
left every judge's sensitivity and every corrected pass share undefined. Sensitivity
rests on the known-good plans alone; specificity pools every variant."""


def _plans(
    control: ControlDetails, declared: Sequence[ControlDetails]
) -> dict[str, ControlDetails]:
    """The task's distinct plans, each with the first declaration of it (log order)."""
    out: dict[str, ControlDetails] = {}
    for d in declared:
        if (d.campaign_id, d.task_id) == (control.campaign_id, control.task_id):
            out.setdefault(d.plan_sha256, d)
    return out


def kind_shares(
    kinds: Collection[Work], seen: Counter[Work], pooled: Counter[Work]
) -> dict[Work, float]:
    """Each kind on offer's share of the draws: its share of the look-alike's runs of the
    kinds on offer (`seen`); where the look-alike has answered none of them yet, of every
    agent's of the campaign (`pooled`); before any, every kind alike.

    A kind the look-alike has never done is not drawn once it has answered: a control
    doing it would be the one run of its model to. (A prior of one run's weight spread
    over the kinds did that: in one CI run, 2026-12-07, six of the eight controls
    wearing the careful agent, which ran its code in every run, answered in prose or
    left their code unrun.) A kind no agent does is then played by no control: none
    could play it blind."""
    for counts in (seen, pooled):
        n = sum(counts[k] for k in kinds)
        if n:
            return {k: counts[k] / n for k in kinds}
    return {k: 1 / len(kinds) for k in kinds}


def plan_weights(
    works: Mapping[str, Work],
    good: Collection[str],
    seen: Counter[Work],
    pooled: Counter[Work] | None = None,
) -> dict[str, float]:
    """Each plan's chance: its kind's `kind_shares`, split between the kind's plans, the
    known-good ones (`good`) taking `GOOD_SHARE` of it where the kind has known-bad ones
    too, evenly otherwise."""
    share = kind_shares(set(works.values()), seen, pooled or Counter())
    out: dict[str, float] = {}
    for kind, weight in share.items():
        plans = [p for p, w in works.items() if w == kind]
        known_good = [p for p in plans if p in good]
        known_bad = [p for p in plans if p not in good]
        if known_good and known_bad:
            out.update({p: weight * GOOD_SHARE / len(known_good) for p in known_good})
            out.update({p: weight * (1 - GOOD_SHARE) / len(known_bad) for p in known_bad})
        else:
            out.update({p: weight / len(plans) for p in plans})
    return out


def choosable(
    control: ControlDetails, declared: Sequence[ControlDetails], works: Mapping[str, Work]
) -> dict[str, ControlDetails]:
    """The plans `control` draws from: its task's plans whose kind of work is known
    (`works`), where it `chooses` and its own plan is one of at least two; else none (it
    plays its declaration)."""
    if not control.chooses:
        return {}
    plans = {p: d for p, d in _plans(control, declared).items() if p in works}
    if control.plan_sha256 not in plans or len(plans) < 2:
        return {}
    return plans


def weighs_kinds(
    control: ControlDetails, declared: Sequence[ControlDetails], works: Mapping[str, Work]
) -> bool:
    """Whether the look-alike's kinds of work can move `control`'s draw: its plans on offer
    are of at least two kinds. Where they are not, a control has no reason to wait for its
    look-alike's first answer (`Driver._chosen`)."""
    return len({works[p] for p in choosable(control, declared, works)}) > 1


def choose_plan(
    control: ControlDetails,
    declared: Sequence[ControlDetails],
    works: Mapping[str, Work],
    seen: Counter[Work],
    *,
    key: bytes,
    run_id: str,
    pooled: Counter[Work] | None = None,
) -> ControlDetails:
    """The declaration the run plays: `control` itself unless it `chooses`; else one of
    its task's plans whose kind of work is known (`works`: plan -> kind), drawn by
    `plan_weights` from the look-alike's runs (`seen`; every agent's, `pooled`, before it
    has any), the draw keyed by `key` (the deployment's controls secret) and the run, so
    a rerun of the same choice draws alike."""
    plans = choosable(control, declared, works)
    if not plans:
        return control
    good = {p for p, d in plans.items() if d.expected == "pass"}
    weights = plan_weights({p: works[p] for p in plans}, good, seen, pooled)
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
