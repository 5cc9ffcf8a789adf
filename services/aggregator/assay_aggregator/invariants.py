"""The log's invariants, checkable on any log (`assay check`, the fault tests).

1. **One outcome per run.** Every requested run ends once: it is judged, or failed with
   its stage and cause, or it is still in flight within its limits (its campaign moved
   less than its wall clock plus a grace ago: a run may wait its turn behind the
   campaign's other runs for longer, at a low concurrency, and the log cannot tell a
   queue from a stall while its campaign moves); a run its stopped campaign never requested
   ends once too, cancelled (`RunCancelled`). An end of a run that had ended is a breach
   even though the counting rule refuses it: some service tried to end the run twice (a
   cancellation of a requested run, a request of a cancelled one, count the same).
2. **No live sandbox without a live run.** The sandbox-manager logs no event when it
   destroys a sandbox, but it destroys one only after sealing the run (or on seeing its
   seal declared lost), so what the log can show is: a SandboxReady logged after its run
   had ended, and a run that ended in a sandbox more than the grace ago with neither a
   seal nor a seal declared lost (its sandbox may still be alive).
3. **Every sealed run judged by each enabled judge.** A run sealed as finished owes each
   judge enabled for its campaign (the judges it names and those that registered for
   it, with their samples, as the judges take them) and the rule judge a verdict or a
   JudgmentFailed once the grace has passed since its seal.
4. **One fold.** Where `RunHistory` has a run is where the aggregator's fold has it; a
   logged `CampaignStopped` is the decision the fold takes from the log before it.

The fifth, "the live report equals a replay", needs the stream (`verify.verify`); the
CLI adds it. Everything here is pure: it reads the events that counted (the counting rule is
the aggregator's, so the checks live beside it, not in the contracts) and a clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, NamedTuple

from assay_report.state import RunRecord, State
from assay_schemas import (
    RULES_JUDGE_ID,
    AgentStepLogged,
    ArtifactsSealed,
    Event,
    RunFailed,
    RunHistory,
    SandboxReady,
    advance,
    lifecycle_step,
    samples_owed,
)

from .counting import counts
from .fold import apply, subject_of

__all__ = ["DEFAULT_GRACE_S", "Breach", "BreachKind", "LogCheck", "check_log"]

DEFAULT_GRACE_S = 300.0
"""How long past its limits a run (or past its seal, its verdicts) may still be in flight."""

BreachKind = Literal[
    "second_end",
    "stuck_run",
    "sandbox_after_end",
    "unsealed_sandbox",
    "verdict_missing",
    "fold_disagrees",
    "stop_differs",
    "replay_differs",
]


class Breach(NamedTuple):
    """One broken invariant, named for people and scripts."""

    kind: BreachKind
    run_id: str
    """The run it is about ('' when it is about the whole log)."""
    detail: str


def _age(now: datetime, then: datetime) -> float:
    return (now - then).total_seconds()


@dataclass
class LogCheck:
    """Checks the events of a log as they are folded (`observe` each one, in log order,
    after the counting rule and the fold saw it), then lists what breaks (`breaches`)."""

    state: State = field(default_factory=State)
    runs: dict[str, RunHistory] = field(default_factory=dict)
    """run id -> the history of its counted events (steps left out: they move nothing)."""
    second_ends: dict[int, Event] = field(default_factory=dict)
    """sequence -> an end of a run that had ended (refused)."""
    ready_at: dict[str, int] = field(default_factory=dict)
    """run id -> sequence of its (first) SandboxReady."""
    moved: dict[str, datetime] = field(default_factory=dict)
    """campaign id -> the latest time one of its runs' counted events happened."""

    def observe(self, sequence: int, event: Event) -> None:
        """Take one stored event in, once the state has folded (or refused) it."""
        rid = event.run_id
        if not rid:
            return
        if self.state.seen.get(event.event_id) == sequence:
            cid = event.campaign_id
            self.moved[cid] = max(self.moved.get(cid, event.occurred_at), event.occurred_at)
        if isinstance(event, AgentStepLogged):
            return
        history = self.runs.setdefault(rid, RunHistory())
        first = self.state.seen.get(event.event_id)
        if first != sequence:
            step = lifecycle_step(event)
            # Refused: an end the lifecycle refuses is the breach this check is for (the
            # same event stored again is a harmless repeat, not a second end).
            if first is None and step is not None and advance(history.phase, step) is None:
                self.second_ends[sequence] = event
            return
        if isinstance(event, SandboxReady):
            self.ready_at.setdefault(rid, sequence)
        history.apply(event)

    def breaches(self, now: datetime, grace_s: float = DEFAULT_GRACE_S) -> list[Breach]:
        """Every breach of the invariants at `now`, run by run, in run id order."""
        out = [self._second_end(seq, e) for seq, e in sorted(self.second_ends.items())]
        for cid, stop in sorted(self.state.stopping.items()):
            if stop.logged is not None and stop.logged != stop.decision:
                out.append(
                    Breach(
                        "stop_differs",
                        "",
                        f"campaign {cid}: CampaignStopped at seq {stop.logged_sequence} is "
                        f"not the decision its log takes ({stop.decision or 'no stop'})",
                    )
                )
        for rid in sorted(self.runs):
            record = self.state.runs.get(rid)
            if record is None:
                continue  # every event of the run was refused: nothing of it counts
            history = self.runs[rid]
            if history.phase != record.phase:
                out.append(
                    Breach(
                        "fold_disagrees",
                        rid,
                        f"RunHistory has run {rid} "
                        f"{history.phase}, the aggregator's fold {record.phase}",
                    )
                )
            out += self._run(rid, history, record, now, grace_s)
        return out

    def _second_end(self, sequence: int, event: Event) -> Breach:
        rid = event.run_id or ""
        record = self.state.runs.get(rid)
        when = f"seq {record.end_sequence}" if record is not None else "an earlier event"
        return Breach(
            "second_end",
            rid,
            f"{event.event_type} at seq {sequence} ends run "
            f"{rid} again (it ended at {when}); refused, the first end stands",
        )

    def _run(
        self, rid: str, history: RunHistory, record: RunRecord, now: datetime, grace_s: float
    ) -> list[Breach]:
        out: list[Breach] = []
        ready = self.ready_at.get(rid)
        if ready is not None and record.end_sequence and ready > record.end_sequence:
            out.append(
                Breach(
                    "sandbox_after_end",
                    rid,
                    f"SandboxReady at seq {ready} made "
                    f"a sandbox for run {rid}, which ended at seq {record.end_sequence}",
                )
            )
        if history.phase in ("finished", "failed") and history.sandbox is not None:
            out += self._unsealed(rid, history, now, grace_s)  # its seal is what is missing
        elif history.phase in ("unknown", "requested", "running", "finished"):
            out += self._in_flight(rid, history, now, grace_s)
        if history.phase == "sealed" and history.seal is not None:
            out += self._owed(rid, history, history.seal, now, grace_s)
        return out

    def _in_flight(
        self, rid: str, history: RunHistory, now: datetime, grace_s: float
    ) -> list[Breach]:
        request = history.request
        if request is None:
            return []  # not requested on this log: nothing is owed on it
        limit = request.limits.wall_clock_s + grace_s
        moved = max(request.occurred_at, self.moved.get(request.campaign_id, request.occurred_at))
        still = _age(now, moved)
        if still <= limit:
            return []
        where = f" in sandbox {history.sandbox.sandbox_id}" if history.sandbox else ""
        return [
            Breach(
                "stuck_run",
                rid,
                f"run {rid} is {history.stage}{where} {_age(now, request.occurred_at):.0f} s "
                f"after its request, and its campaign has not moved for {still:.0f} s, past "
                f"the run's wall clock and grace ({limit:.0f} s), with no outcome (judged, or "
                "failed with stage and cause)",
            )
        ]

    def _unsealed(
        self, rid: str, history: RunHistory, now: datetime, grace_s: float
    ) -> list[Breach]:
        if history.seal is not None or _seal_lost(history.failures):
            return []
        ended = history.failure or history.ended
        if ended is None or _age(now, ended.occurred_at) <= grace_s:
            return []
        sandbox = history.sandbox.sandbox_id if history.sandbox else "?"
        return [
            Breach(
                "unsealed_sandbox",
                rid,
                f"run {rid} ended ({ended.event_type}) and its "
                f"sandbox {sandbox} was neither sealed nor declared lost: it may be live",
            )
        ]

    def _owed(
        self, rid: str, history: RunHistory, seal: ArtifactsSealed, now: datetime, grace_s: float
    ) -> list[Breach]:
        if _age(now, seal.occurred_at) <= grace_s:
            return []
        missing = sorted(self.owed(seal) - self._given(rid))
        if not missing:
            return []
        names = ", ".join(f"{judge} sample {sample}" for judge, sample in missing)
        return [
            Breach(
                "verdict_missing",
                rid,
                f"run {rid} was sealed and has no verdict or JudgmentFailed from {names}",
            )
        ]

    def owed(self, seal: ArtifactsSealed) -> set[tuple[str, int]]:
        """(judge, sample) owed on a run sealed as finished: the rule judge's one, and each
        enabled judge's samples (the larger of its and the task's `sampling_times`)."""
        cid = seal.campaign_id
        task = self.state.task_samples.get(f"{cid}/{seal.task_id}", 1)
        owed = {(RULES_JUDGE_ID, 0)}
        for key, samples in self.state.judge_samples.items():
            campaign, judge = key.split("/", 1)
            if campaign == cid:
                owed |= {(judge, s) for s in range(samples_owed(samples, task))}
        return owed

    def _given(self, rid: str) -> set[tuple[str, int]]:
        history = self.runs[rid]
        return {(k.judge_id, k.sample) for k in (*history.verdicts, *history.judgment_failures)}


def _seal_lost(failures: Iterable[RunFailed]) -> bool:
    return any(f.stage == "seal" for f in failures)


def check_log(
    events: Iterable[tuple[int, Event]],
    *,
    now: datetime | None = None,
    grace_s: float = DEFAULT_GRACE_S,
) -> tuple[State, list[Breach]]:
    """Fold ``(sequence, event)`` pairs through the counting rule (signatures unchecked) and list
    the breaches at `now` (default: the current time): for tests and any log in memory."""
    check = LogCheck()
    for sequence, event in events:
        if counts(check.state, sequence, subject_of(event), event):
            apply(check.state, sequence, event)
        check.observe(sequence, event)
    return check.state, check.breaches(now or datetime.now(UTC), grace_s)
