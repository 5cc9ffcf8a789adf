"""ONE hostile log read by every reader: they must agree, event by event, on what counts.

A signed synthetic campaign is published, then the attacks of issue #24 land on the same
log: an outside publisher's unsigned task with runs, steps and a verdict written for it
by genuine services (finding 8); a second verdict for a sample signed by the judge's own
key (finding 9) and its class (unsigned, another role's key, altered bytes, a reused
event id); incomplete
verdicts (finding 15: a rubric dimension unscored, no scores at all, a rule verdict with
scores, a sample past the judge's `sampling_times`, a failure past it). The live
aggregator, `assay report` (its snapshot caught up), `assay replay` (a fresh fold),
`assay audit` of every run, the viewer (its fold and its run pages) and the Parquet
export must each count exactly the undisturbed events, and give the undisturbed figures.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl

from assay.bus import Bus
from assay.config import Settings
from assay.security.signing import ensure_operator, signer_for, trust_for
from assay.store import LocalBlobStore
from assay_aggregator.audit import REFUSED, audit_run, load_run_events
from assay_aggregator.rebuild import fold_stream
from assay_aggregator.service import build as build_aggregator
from assay_aggregator.snapshot import read_projections
from assay_report.export import export_parquet
from assay_report.projections import Projections
from assay_report.report import build_report
from assay_schemas import (
    RULES_JUDGE_ID,
    AgentFinished,
    DimensionScore,
    Event,
    JudgmentRecorded,
    RunRequested,
    Task,
    TaskSubmitted,
    run_id_for,
)
from assay_testing.events import judgment_failed
from assay_testing.synthetic_log import clean_log, publish_events, synthetic_events
from assay_viewer.data import Source

SPEC = clean_log(n_tasks=4, n_agents=2, n_samples=2, seed=3)


def figures(p: Projections) -> dict[str, Any]:
    """Every figure of the report; what only says where the log stands is left out."""
    doc = json.loads(build_report(p, n_resamples=200).model_dump_json())
    for key in ("log_sequence", "refused", "trust_root"):
        doc.pop(key)
    return dict(doc)


class Attacker:
    """Writes messages onto the log as a given service would (or unsigned, or altered)."""

    def __init__(self, bus: Bus, settings: Settings) -> None:
        self.bus, self.settings = bus, settings
        self.sequences: list[int] = []
        self.on_runs: set[int] = set()
        """Sequences of the messages that name a run (all but the outside submission)."""

    async def write(self, event: Event, signer: str | None, *, alter: bool = False) -> None:
        subject = self.bus.subjects.of(event)
        data = event.model_dump_json().encode()
        # Its own message id: JetStream would drop a repeated one before it is stored.
        headers = {"Nats-Msg-Id": f"attack-{len(self.sequences)}"}
        if signer is not None:
            key = signer_for(self.settings, signer)
            assert key is not None
            headers.update(key.headers(subject, data))
        if alter:  # bytes changed after signing
            data = data.replace(b'"score":', b'"score": ', 1)
        ack = await self.bus.js.publish(subject, data, headers=headers)
        self.sequences.append(ack.seq)
        if event.run_id:
            self.on_runs.add(ack.seq)


def _tens(v: JudgmentRecorded) -> dict[str, DimensionScore]:
    return {k: DimensionScore(score=10, reason="forged") for k in v.scores}


async def _attack(attacker: Attacker, events: list[Event]) -> str:
    """Every hostile message of the issue; returns the outside task's run id."""
    verdicts = [e for e in events if isinstance(e, JudgmentRecorded)]
    llm = [v for v in verdicts if v.judge_id == "judge_a"]
    first, other, third = llm[0], llm[2], llm[4]
    assert len({first.run_id, other.run_id, third.run_id}) == 3
    ten = first.model_copy(update={"scores": _tens(first)})
    # Finding 9 and its class: a second verdict for a sample, however it is signed.
    await attacker.write(ten.model_copy(update={"event_id": "second"}), "judge-judge_a")
    await attacker.write(ten.model_copy(update={"event_id": "unsigned"}), None)
    await attacker.write(ten.model_copy(update={"event_id": "wrong-role"}), "runner")
    await attacker.write(
        ten.model_copy(update={"event_id": "altered"}), "judge-judge_a", alter=True
    )
    # ... and a whole verdict on a sample nobody rated, under an id the log holds already.
    reused = other.model_copy(update={"event_id": first.event_id, "judge_id": "judge_c"})
    await attacker.write(reused, "judge-judge_c")
    # Finding 15: verdicts that are not whole, each on a sample nobody rated yet.
    dims = sorted(other.scores)
    partial_scores = {k: other.scores[k] for k in dims[1:]}
    await attacker.write(
        other.model_copy(
            update={"event_id": "partial", "judge_id": "judge_c", "scores": partial_scores}
        ),
        "judge-judge_c",
    )
    await attacker.write(
        third.model_copy(update={"event_id": "empty", "judge_id": "judge_c", "scores": {}}),
        "judge-judge_c",
    )
    await attacker.write(
        ten.model_copy(update={"event_id": "past", "sample": SPEC.n_samples}), "judge-judge_a"
    )
    rules = next(v for v in verdicts if v.judge_id == RULES_JUDGE_ID)
    await attacker.write(
        rules.model_copy(
            update={
                "event_id": "scored-rules",
                "sample": 0,
                "run_id": other.run_id,
                "task_id": other.task_id,
                "scores": _tens(first),
            }
        ),
        f"judge-{RULES_JUDGE_ID}",
    )
    failed = judgment_failed(first, "judge_a", SPEC.n_samples + 3, event_id="failed-past")
    await attacker.write(failed, "judge-judge_a")
    # Finding 8: an outside publisher's unsigned task, and what genuine services wrote for it.
    request = next(e for e in events if isinstance(e, RunRequested))
    task = Task(task_id="outside", prompt="count nothing")
    submitted = TaskSubmitted(
        event_id="outside-task",
        campaign_id=request.campaign_id,
        task_id=task.task_id,
        task=task,
        producer=request.producer,
    )
    await attacker.write(submitted, None)
    rid = run_id_for(request.campaign_id, task.task_id, request.agent.agent_id, 0)
    where = {"run_id": rid, "task_id": task.task_id}
    await attacker.write(
        request.model_copy(
            update={
                **where,
                "event_id": "outside-run",
                "task": task,
                "causation_id": "outside-task",
                "epoch": 0,
            }
        ),
        "runner",
    )
    finish = next(e for e in events if isinstance(e, AgentFinished))
    await attacker.write(finish.model_copy(update={**where, "event_id": "outside-end"}), "runner")
    await attacker.write(
        ten.model_copy(update={**where, "event_id": "outside-verdict"}), "judge-judge_a"
    )
    return rid


def _audit_refused(signers: dict[int, str]) -> set[int]:
    return {seq for seq, who in signers.items() if who.startswith(REFUSED)}


async def test_every_reader_counts_the_same_events_of_one_hostile_log(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    ensure_operator(settings)
    trust = trust_for(settings)
    assert trust is not None
    store = LocalBlobStore(settings.blob_dir)
    events = list(synthetic_events(SPEC, store=store))
    await publish_events(
        bus.js, bus.subjects, bus.stream.name, events, signers=partial(signer_for, settings)
    )
    clean = await fold_stream(bus.js, bus.stream.name, bus.subjects.events, trust=trust)
    assert clean.refused == {}
    clean_figures = figures(Projections(clean))
    runs = sorted(clean.runs)
    clean_audits = {}
    for rid in runs:
        logged, signers = await load_run_events(bus, rid, trust)
        clean_audits[rid] = audit_run(logged, store, signers=signers).contribution

    attacker = Attacker(bus, settings)
    outside = await _attack(attacker, events)
    hostile = set(attacker.sequences)

    # The live aggregator (per-message signature checks), then its snapshot.
    aggregator = build_aggregator(settings, write_report=False, n_resamples=200)
    await aggregator.start()
    try:
        await aggregator.wait_for(max(hostile))
        assert set(aggregator.state.refused) == hostile
        assert figures(aggregator.projections) == clean_figures
    finally:
        await aggregator.stop()
    # What `assay report` reads (the snapshot caught up) and `assay replay` (a fresh fold).
    for fresh in (False, True):
        p = await read_projections(settings, service="cli", fresh=fresh)
        assert set(p.state.refused) == hostile, fresh
        assert figures(p) == clean_figures, fresh
    # `assay audit` of every run, the outside one too: refused exactly where the fold is.
    audited: set[int] = set()
    for rid in [*runs, outside]:
        logged, signers = await load_run_events(bus, rid, trust)
        audit = audit_run(logged, store, signers=signers)
        audited |= _audit_refused(signers)
        if rid == outside:
            assert audit.refused and not audit.contribution.scored
            assert {line.signer.startswith(REFUSED) for line in audit.chain} == {True}
        else:
            assert not audit.refused
            assert audit.contribution == clean_audits[rid], rid  # never "mean 10.00 → PASS"
    assert audited == attacker.on_runs
    # The viewer: its fold, and the run pages it builds from it.
    source = Source(settings, resamples=200)
    try:
        p = await source.projections()
        assert set(p.state.refused) == hostile and figures(p) == clean_figures
        view = await source.run(outside)
        assert view is not None and view.audit.refused
        for rid in runs:
            page = await source.run(rid)
            assert page is not None and not page.audit.refused
            assert page.audit.contribution == clean_audits[rid]
    finally:
        await source.close()
    # The Parquet export: no refused verdict, run or task in any table.
    p = await read_projections(settings, service="cli")
    folder = tmp_path / "parquet"
    export_parquet(p, build_report(p, n_resamples=200), folder)
    counted = {
        seq for seq, e in enumerate(events, 1) if isinstance(e, JudgmentRecorded) and e.scores
    }
    judgments = pl.read_parquet(folder / "projection_judgments.parquet")
    assert set(judgments["sequence"].to_list()) == counted
    assert outside not in pl.read_parquet(folder / "projection_runs.parquet")["run_id"].to_list()
    tasks = pl.read_parquet(folder / "projection_tasks.parquet")["task_id"].to_list()
    assert "outside" not in tasks and len(tasks) == SPEC.n_tasks
