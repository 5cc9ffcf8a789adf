"""The run lifecycle under random logs (issue #54): a Hypothesis state machine writes a log
of a small campaign's runs in any interleaving, with redeliveries, repeats, late and
out-of-order events, second ends and failures at every stage, and folds it live as the
aggregator does. After every step: each run has at most one end that counts, every other
end is refused and named by `assay check`, a failure decides the run whatever is sealed
afterwards, and `RunHistory`, the campaign fold and the aggregator agree; at the end of
each example the live fold equals a fresh replay of the log, tables and report alike.

Out of order here means out of the natural order *in the log* (a seal before its end, a
verdict before its seal, a sandbox after the end): the live fold is handed the log in
sequence order, redeliveries included, as the aggregator's consumer hands it.

Derandomized (a fixed seed from the test's name), so CI runs the same examples each time.
"""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from assay_aggregator import fold
from assay_aggregator.counting import counts
from assay_aggregator.fold import apply, subject_of
from assay_aggregator.invariants import LogCheck
from assay_report import Projections
from assay_report.report import build_report, report_json
from assay_report.state import State, state_to_json
from assay_schemas import (
    END_STEPS,
    Event,
    JudgmentFailed,
    JudgmentRecorded,
    RunFailed,
    RunHistory,
    lifecycle_step,
)
from assay_testing.synthetic_log import LogSpec, synthetic_events

SPEC = LogSpec(
    campaign_id="stateful",
    n_tasks=1,
    n_agents=3,
    n_samples=1,
    steps_per_run=1,
    infrastructure_failure_rate=0.0,
    empty_artifact_rate=0.0,
    seed=54,
)
STAGES = ("sandbox", "agent", "seal", "judge")


def _templates() -> tuple[list[Event], dict[str, dict[str, list[Event]]]]:
    """The campaign's opening events, and each run's events by type."""
    opening: list[Event] = []
    runs: dict[str, dict[str, list[Event]]] = {}
    for e in synthetic_events(SPEC):
        if e.run_id is None:
            opening.append(e)
        else:
            runs.setdefault(e.run_id, {}).setdefault(e.event_type, []).append(e)
    return opening, runs


OPENING, RUNS = _templates()
RUN_IDS = sorted(RUNS)


def _failure(run: str, stage: str, infrastructure: bool, n: int) -> RunFailed:
    finish = RUNS[run]["AgentFinished"][0]
    return RunFailed(
        event_id=f"failed-{run}-{stage}-{n}",
        campaign_id=finish.campaign_id,
        run_id=run,
        task_id=finish.task_id,
        producer=finish.producer,
        stage=stage,  # type: ignore[arg-type]
        error=f"{stage} broke",
        infrastructure=infrastructure,
    )


class RunLifecycleMachine(RuleBasedStateMachine):
    """A log written rule by rule, folded live; the lifecycle's invariants after each rule."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[Event] = []
        self.live = State()
        self.check = LogCheck(state=self.live)
        self.n = 0

    def _append(self, event: Event) -> None:
        self.log.append(event)
        self._deliver(len(self.log), event)

    def _deliver(self, sequence: int, event: Event) -> None:
        if counts(self.live, sequence, subject_of(event), event):
            apply(self.live, sequence, event)
        self.check.observe(sequence, event)

    @initialize()
    def open_campaign(self) -> None:
        for e in OPENING:
            self._append(e)

    # --- what producers write, in any order --------------------------------------------

    @rule(
        run=st.sampled_from(RUN_IDS),
        kind=st.sampled_from(["RunRequested", "SandboxReady", "AgentStepLogged"]),
    )
    def phase_event(self, run: str, kind: str) -> None:
        self._append(RUNS[run][kind][0])

    @rule(run=st.sampled_from(RUN_IDS), fresh_id=st.booleans())
    def agent_finished(self, run: str, fresh_id: bool) -> None:
        finish = RUNS[run]["AgentFinished"][0]
        self.n += 1
        # A fresh id is what the runner writes when it ends a run a second time.
        self._append(
            finish.model_copy(update={"event_id": f"fin-{self.n}"}) if fresh_id else finish
        )

    @rule(run=st.sampled_from(RUN_IDS), stage=st.sampled_from(STAGES), infra=st.booleans())
    def run_failed(self, run: str, stage: str, infra: bool) -> None:
        self.n += 1
        self._append(_failure(run, stage, infra, self.n))

    @rule(run=st.sampled_from(RUN_IDS), failed=st.booleans())
    def sealed(self, run: str, failed: bool) -> None:
        seal = RUNS[run]["ArtifactsSealed"][0]
        self._append(seal.model_copy(update={"outcome": "failed"}) if failed else seal)

    @rule(run=st.sampled_from(RUN_IDS), which=st.integers(0, 2), gave_up=st.booleans())
    def judged(self, run: str, which: int, gave_up: bool) -> None:
        verdict = RUNS[run]["JudgmentRecorded"][which]
        assert isinstance(verdict, JudgmentRecorded)
        if gave_up:
            self._append(
                JudgmentFailed(
                    event_id=f"gave-up-{verdict.event_id}",
                    campaign_id=verdict.campaign_id,
                    run_id=run,
                    task_id=verdict.task_id,
                    producer=verdict.producer,
                    judge_id=verdict.judge_id,
                    sample=verdict.sample,
                    error="503",
                    attempts=3,
                )
            )
        else:
            self._append(verdict)

    # --- what the bus does ---------------------------------------------------------------

    @precondition(lambda self: len(self.log) > len(OPENING))
    @rule(data=st.data())
    def stored_again(self, data: st.DataObject) -> None:
        """The same event stored twice (a publish retried past the dedupe window)."""
        self._append(data.draw(st.sampled_from(self.log[len(OPENING) :])))

    @precondition(lambda self: len(self.log) > len(OPENING))
    @rule(data=st.data())
    def redelivered(self, data: st.DataObject) -> None:
        """A stored message delivered to the live fold again (a lost ack)."""
        sequence = data.draw(st.integers(len(OPENING) + 1, len(self.log)))
        self._deliver(sequence, self.log[sequence - 1])

    # --- the invariants ------------------------------------------------------------------

    def _counted(self, run: str) -> list[tuple[int, Event]]:
        return [
            (seq, e)
            for seq, e in enumerate(self.log, 1)
            if e.run_id == run and self.live.seen.get(e.event_id) == seq
        ]

    @invariant()
    def one_end_per_run_and_every_other_end_refused(self) -> None:
        for run in RUN_IDS:
            counted = self._counted(run)
            ends = [seq for seq, e in counted if lifecycle_step(e) in END_STEPS]
            assert len(ends) <= 1, (run, ends)
            for seq, e in enumerate(self.log, 1):
                if e.run_id == run and lifecycle_step(e) in END_STEPS and seq not in ends:
                    # Not the end that counts: the same event stored again, or refused.
                    assert e.event_id in self.live.seen or seq in self.live.refused, (run, seq)
        # `assay check` names exactly the refused moves of a run, not the repeats.
        refused = {
            seq
            for seq, e in enumerate(self.log, 1)
            if lifecycle_step(e) is not None and e.event_id not in self.live.seen
        }
        assert set(self.check.second_ends) == refused

    @invariant()
    def a_failure_decides_the_run_whatever_is_sealed_after(self) -> None:
        for run in RUN_IDS:
            record = self.live.runs.get(run)
            failures = [e for _, e in self._counted(run) if isinstance(e, RunFailed)]
            if record is None:
                continue
            history = RunHistory.fold(e for _, e in self._counted(run))
            assert history.phase == record.phase, run
            if not failures:
                assert not record.failed and record.phase != "failed"
                continue
            first = failures[0]
            assert record.phase == "failed" and record.failed, run
            assert (
                record.infrastructure_failure
                == first.infrastructure
                == history.infrastructure_failure
            )
            assert record.failure_stage == first.stage
            campaign = self.live.histories[SPEC.campaign_id]
            assert campaign.failures[run].event_id == first.event_id
            assert run not in campaign.sealed  # a failed run owes no verdict

    @invariant()
    def the_log_readers_agree(self) -> None:
        kinds = {b.kind for b in self.check.breaches(max(e.occurred_at for e in self.log))}
        assert "fold_disagrees" not in kinds
        for run in RUN_IDS:
            raw = RunHistory.fold(e for e in self.log if e.run_id == run)
            record = self.live.runs.get(run)
            if record is not None:
                assert raw.phase == record.phase, run

    def teardown(self) -> None:
        fresh = fold(enumerate(self.log, 1))
        assert _json(state_to_json(self.live)) == _json(state_to_json(fresh))
        live, again = Projections(self.live), Projections(fresh)
        for name, table in live.tables().items():
            assert table.equals(again.table(name)), name
            if name == "runs":
                for row in table.iter_rows(named=True):
                    record = self.live.runs[row["run_id"]]
                    if row["failure_stage"]:
                        assert row["state"] == "failed", row
                    assert row["infrastructure_failure"] == record.infrastructure_failure
        assert report_json(build_report(live, n_resamples=20)) == report_json(
            build_report(again, n_resamples=20)
        )


def _json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, sort_keys=True, default=str)


RunLifecycleMachine.TestCase.settings = settings(
    derandomize=True,
    max_examples=60,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_run_lifecycle = RunLifecycleMachine.TestCase
