"""A run's lifecycle, stated once: its states, what moves it, how it ends.

::

    requested ─SandboxReady─▶ running ─AgentFinished─▶ finished ─ArtifactsSealed─▶ sealed ─verdict─▶ judged
        │                        │                        │
        └─RunFailed(sandbox)─────┴─RunFailed(agent)──▶ failed ◀─RunFailed(seal: lost)
                                                          │
                                                          └─ArtifactsSealed: kept as evidence, still failed

    (never requested) ─RunCancelled─▶ cancelled     (its campaign stopped early, #51)

A run ends once: its *end* is the first AgentFinished, RunFailed at the sandbox or
agent stage, or RunCancelled. Its *outcome* is exactly one of

- **judged**: sealed after the agent finished, and scored by a machine judge;
- **failed**, with the stage and the cause of the failure that decided it;
- **cancelled**: never requested, its campaign stopped (never a failure).

Precedence, in log order:

- A seal after a failure keeps the failure: the files are evidence, the run still
  failed (at its stage, infrastructure or not).
- A second end (a second AgentFinished, AgentFinished after RunFailed, RunFailed at the
  sandbox or agent stage after either) is *refused*, like a second verdict for a sample:
  the first stands.
- A seal declared lost (RunFailed at the seal stage) fails a run that finished; after a
  failure it is kept (a fact about the seal) and changes nothing; after a seal it is
  refused (the log holds one or the other, `SandboxService._settle`).
- A cancellation is for a run never requested: after a request it is refused (a requested
  run is never cancelled, it finishes), and after a cancellation every step is refused
  (a request, a sandbox, an end: the run was not to run).
- Events that arrive after their phase (a SandboxReady after the end, a step after
  the seal) count as facts and move nothing.

`TRANSITIONS` is the whole rule: :func:`advance` reads it, and every fold of a run
(`RunHistory`, `CampaignHistory`, the aggregator's records and counting rule, `assay check`)
calls :func:`advance`, so none of them states the rule again. Pure data and functions.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Literal, NamedTuple

from ._domain import RULES_JUDGE_ID
from ._envelope import Event
from ._errors import FailureStage
from ._events import (
    AgentFinished,
    ArtifactsSealed,
    JudgmentRecorded,
    RunCancelled,
    RunFailed,
    RunRequested,
    SandboxReady,
)

__all__ = [
    "END_STEPS",
    "REFUSED",
    "TRANSITIONS",
    "LifecycleStep",
    "LifecycleWalk",
    "RunOutcome",
    "RunPhase",
    "RunState",
    "advance",
    "lifecycle_step",
    "run_state",
    "scores_run",
    "walk",
]

RunPhase = Literal["unknown", "requested", "running", "finished", "failed", "sealed", "cancelled"]
"""Where a run is, by the events that move it (being judged is read beside: `run_state`)."""

RunState = Literal[
    "unknown", "requested", "running", "finished", "failed", "sealed", "judged", "cancelled"
]
"""Where a run is: no request seen yet; requested; its sandbox is ready; its agent
finished; it failed (at any stage, sealed or not); its artifacts are sealed (ready for
the judges); a machine judge scored it; cancelled before it was requested."""

LifecycleStep = Literal["request", "sandbox", "finish", "fail", "lose_seal", "seal", "cancel"]
"""What an event does to a run: RunRequested, SandboxReady, AgentFinished, RunFailed at
the sandbox or agent stage, RunFailed at the seal (or judge) stage, ArtifactsSealed,
RunCancelled."""

END_STEPS: frozenset[LifecycleStep] = frozenset({"finish", "fail", "cancel"})
"""The steps that end a run (at most one counts)."""

REFUSED = None
"""A step refused in a phase: the run has ended already (the first end stands)."""

TRANSITIONS: Mapping[RunPhase, Mapping[LifecycleStep, RunPhase | None]] = {
    # A missing entry keeps the phase: the event is late for its phase and moves nothing.
    "unknown": {
        "request": "requested",
        "sandbox": "running",
        "finish": "finished",
        "fail": "failed",
        "lose_seal": "failed",
        "seal": "sealed",
        "cancel": "cancelled",
    },
    "requested": {
        "cancel": REFUSED,
        "sandbox": "running",
        "finish": "finished",
        "fail": "failed",
        "lose_seal": "failed",
        "seal": "sealed",
    },
    "running": {
        "finish": "finished",
        "fail": "failed",
        "lose_seal": "failed",
        "seal": "sealed",
        "cancel": REFUSED,
    },
    "finished": {
        "finish": REFUSED,
        "fail": REFUSED,
        "lose_seal": "failed",
        "seal": "sealed",
        "cancel": REFUSED,
    },
    "failed": {"finish": REFUSED, "fail": REFUSED, "cancel": REFUSED},
    "sealed": {"finish": REFUSED, "fail": REFUSED, "lose_seal": REFUSED, "cancel": REFUSED},
    "cancelled": {
        "request": REFUSED,
        "sandbox": REFUSED,
        "finish": REFUSED,
        "fail": REFUSED,
        "lose_seal": REFUSED,
        "seal": REFUSED,
        "cancel": REFUSED,
    },
}
"""phase → step → the next phase, or `REFUSED` (a second end of the run)."""

_SEAL_STAGES: frozenset[FailureStage] = frozenset({"seal", "judge"})


_STEP_OF: tuple[tuple[type[Event], LifecycleStep], ...] = (
    (RunRequested, "request"),
    (SandboxReady, "sandbox"),
    (AgentFinished, "finish"),
    (RunFailed, "fail"),
    (ArtifactsSealed, "seal"),
    (RunCancelled, "cancel"),
)


@functools.cache
def _step_of(cls: type[Event]) -> LifecycleStep | None:
    """The class's step, found once per class: every fold asks it of every event, and most
    events (steps, verdicts) move nothing, which a chain of isinstance checks said last."""
    return next((step for base, step in _STEP_OF if issubclass(cls, base)), None)


def lifecycle_step(event: Event) -> LifecycleStep | None:
    """What the event does to its run's lifecycle (None: it moves nothing)."""
    step = _step_of(type(event))
    if step == "fail" and isinstance(event, RunFailed) and event.stage in _SEAL_STAGES:
        return "lose_seal"
    return step


def advance(phase: RunPhase, step: LifecycleStep) -> RunPhase | None:
    """The phase after `step` (None: the step is refused, the run has ended already)."""
    return TRANSITIONS[phase].get(step, phase)


class LifecycleWalk(NamedTuple):
    """Where a run's steps, taken in log order, leave it."""

    phase: RunPhase
    refused: frozenset[int]
    """Indexes of the steps refused (ends of a run that had ended)."""
    ended: int | None
    """Index of the step that ended the run (None while it runs)."""


def walk(steps: Iterable[LifecycleStep]) -> LifecycleWalk:
    """Take a run's steps in log order through `TRANSITIONS`: a fold that is handed its
    events out of order (a redelivery) sorts them by sequence and walks them again."""
    phase: RunPhase = "unknown"
    refused: set[int] = set()
    ended = None
    for i, step in enumerate(steps):
        after = advance(phase, step)
        if after is None:
            refused.add(i)
            continue
        if ended is None and after in ("finished", "failed", "cancelled"):
            ended = i
        phase = after
    return LifecycleWalk(phase, frozenset(refused), ended)


def scores_run(event: JudgmentRecorded) -> bool:
    """Whether this verdict makes its run judged: a machine judge's scores (the rule
    judge's checks and a reviewer's grade do not)."""
    return bool(event.scores) and event.judge_id != RULES_JUDGE_ID and event.judge_kind != "human"


def run_state(phase: RunPhase, judged: bool) -> RunState:
    """The run's state from its phase and whether a machine judge scored it."""
    return "judged" if phase == "sealed" and judged else phase


class RunOutcome(NamedTuple):
    """How a run ended: judged, failed at a stage for a cause, or cancelled unstarted."""

    state: Literal["judged", "failed", "cancelled"]
    stage: FailureStage | None = None
    """Where it failed (None when judged)."""
    cause: str = ""
    """The failure's error (empty when judged)."""
    infrastructure: bool = False
    """The platform failed it: never scored as the agent's failure."""

    @classmethod
    def of(cls, state: RunState, failure: RunFailed | None) -> RunOutcome | None:
        """The outcome of a run in `state` whose deciding failure is `failure` (None: the
        run has not reached one yet)."""
        if state == "failed" and failure is not None:
            return cls("failed", failure.stage, failure.error, failure.infrastructure)
        if state == "judged":
            return cls("judged")
        if state == "cancelled":
            return cls("cancelled")
        return None
