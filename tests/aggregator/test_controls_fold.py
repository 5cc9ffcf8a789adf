"""Control runs in the aggregator: folded from their declarations, kept out of agent
statistics, measured in the Judge validity section; human verdicts (judge kind "human") join them."""

from __future__ import annotations

import math
from typing import Any

import polars as pl
import pytest
from pydantic import ValidationError

from assay.security.controls import ControlsKey, SealBroken
from assay_aggregator import fold
from assay_report import Projections
from assay_report.html import render_html
from assay_report.report import build_report, report_frames
from assay_report.state import State, state_from_json, state_to_json
from assay_report.statistics import AnalysisSettings
from assay_report.validity import control_frame, judge_validity
from assay_report.validity_charts import validity_charts
from assay_schemas import (
    SEALED_CHOICE_CHARS,
    AgentSpec,
    AgentStepLogged,
    ArtifactsSealed,
    CampaignSpec,
    CampaignStarted,
    ControlDeclared,
    ControlDetails,
    ControlsSpec,
    DimensionScore,
    Event,
    FileRef,
    JudgeSpec,
    JudgmentRecorded,
    Producer,
    RunFailed,
    RunRequested,
    Task,
    TaskSubmitted,
    default_rubric,
    run_id_for,
)
from assay_testing.events import run_requested

P = Producer(service="test", version="0")
C = "c1"
DIMS = [d.key for d in default_rubric().dimensions]
KEY = ControlsKey(b"k" * 32)
FORGER = ControlsKey(b"f" * 32)
PLAN = {"good": "a" * 64, "bad": "b" * 64}
SPEC = CampaignSpec(
    campaign_id=C,
    agents=[AgentSpec(agent_id="agent", model="m")],
    judges=[JudgeSpec(judge_id="j1", model="m1"), JudgeSpec(judge_id="j2", model="m2")],
    controls=ControlsSpec(),
)


def _run(task: str, agent: AgentSpec) -> RunRequested:
    rid = run_id_for(C, task, agent.agent_id, 0)
    return run_requested(
        rid, campaign_id=C, task=Task(task_id=task, prompt="p"), agent=agent, producer=P
    )


def _sealed(r: RunRequested) -> ArtifactsSealed:
    f = FileRef(path="results/a.csv", sha256="c" * 64, size=1)
    return ArtifactsSealed(
        event_id=ArtifactsSealed.id_for(r.run_id),
        campaign_id=C,
        run_id=r.run_id,
        task_id=r.task_id,
        files=[f],
        agent_id=r.agent.agent_id,
        epoch=0,
        producer=P,
    )


def _verdict(
    r: RunRequested, judge: str, score: int, event_id: str | None = None
) -> JudgmentRecorded:
    return JudgmentRecorded(
        event_id=event_id or JudgmentRecorded.id_for(r.run_id, judge, 0),
        campaign_id=C,
        run_id=r.run_id,
        task_id=r.task_id,
        judge_id=judge,
        sample=0,
        rubric_id="default",
        rubric_version=1,
        scores={d: DimensionScore(score=score) for d in DIMS},
        producer=P,
        judge_kind="human" if judge.startswith("reviewer-") else "machine",
    )


def _declared(
    r: RunRequested, kind: str, plan: str, key: ControlsKey | None = None
) -> ControlDeclared:
    details = ControlDetails(
        campaign_id=C,
        task_id=r.task_id or "",
        control_run_id=r.run_id or "",
        variant=kind,  # type: ignore[arg-type]
        expected="pass" if kind == "reference" else "fail",
        plan_sha256=plan,
        agent_id=r.agent.agent_id,
    )
    return (key or KEY).declare(details, causation_id=None, producer=P)


def _fold(events: list[Event]) -> State:
    """The log folded by a reader that holds the deployment's controls secret."""
    return fold(enumerate(events, 1), State(controls_key=KEY))


def _log(n_tasks: int = 6, humans: bool = False) -> tuple[list[Event], dict[str, Any]]:
    """Per task: one agent run, a known-good and a known-bad control; j1 passes everything,
    j2 passes only good work (the agent's run is good on even tasks)."""
    events: list[Event] = [CampaignStarted(event_id="cs", campaign_id=C, campaign=SPEC, producer=P)]
    ids: dict[str, Any] = {"controls": set(), "agent": set()}
    for t in range(n_tasks):
        task = f"t{t}"
        events.append(
            TaskSubmitted(
                event_id=f"ts{t}",
                campaign_id=C,
                task_id=task,
                task=Task(task_id=task, prompt="p"),
                producer=P,
            )
        )
        agent = _run(task, SPEC.agents[0])
        # Control agents' requests read like an agent's: only the declaration tells.
        good = _run(task, SPEC.agents[0].model_copy(update={"agent_id": f"g{t}"}))
        bad = _run(task, SPEC.agents[0].model_copy(update={"agent_id": f"b{t}"}))
        events += [
            _declared(good, "reference", PLAN["good"]),
            _declared(bad, "altered_numbers", PLAN["bad"]),
        ]
        # Forged relabelling: a declaration naming the agent's own run (sealed without this
        # deployment's secret: whoever holds it and signs as the CLI is the submitter), and
        # a second, contradicting declaration of a control: neither counts.
        events += [
            _declared(agent, "prose_only", PLAN["bad"], key=FORGER),
            _declared(good, "prose_only", PLAN["good"]),
        ]
        for r, quality in ((agent, t % 2 == 0), (good, True), (bad, False)):
            events += [r, _sealed(r), _verdict(r, "j1", 9), _verdict(r, "j2", 9 if quality else 3)]
            if humans:
                events.append(_verdict(r, "reviewer-ann", 9 if quality else 2))
        ids["controls"] |= {good.run_id, bad.run_id}
        ids["agent"].add(agent.run_id)
    return events, ids


def test_controls_are_folded_and_measured_but_never_counted_for_agents() -> None:
    events, ids = _log()
    p = Projections(_fold(events))
    assert set(p.control_runs()) == ids["controls"]
    assert set(p.statistics_tables([C]).runs["run_id"]) == ids["agent"]
    frame = control_frame(p, [C])
    assert set(frame["run_id"]) == ids["controls"], "a declaration never relabels an agent's run"
    assert set(frame.filter(pl.col("expected") == "pass")["variant"]) == {"reference"}
    report = build_report(p, campaign=C, n_resamples=200)
    assert [a.agent_id for a in report.agents] == ["agent"]
    assert [c.n_agents for c in report.campaigns] == [1], "control agents are no campaign agents"
    assert all(j.n_runs == 6 for j in report.judges if j.judge_id != "rules")
    v = report.validity
    assert v is not None and v.n_control_runs == 12
    rates = {(r.judge_id, r.variant, r.measure): r.estimate for r in v.control_rates}
    assert rates[("j1", None, "sensitivity")] == 1.0 and rates[("j1", None, "specificity")] == 0.0
    assert rates[("j2", None, "sensitivity")] == 1.0 and rates[("j2", None, "specificity")] == 1.0
    assert rates[(None, None, "specificity")] == 1.0  # the jury mean (9 + 3)/2 = 6 fails it
    corrected = {(r.agent_id, r.judge_id): r for r in v.corrected_pass_shares}
    # j2 is perfect: its corrected share is its raw share (half the tasks are good).
    assert corrected[("agent", "j2")].raw_share == 0.5 == corrected[("agent", "j2")].estimate
    # j1 passes everything: Se + Sp = 1, no correction is possible, and a warning says so.
    assert math.isnan(corrected[("agent", "j1")].unclipped)
    assert any(w.kind == "correction_undefined" and w.subject == "j1" for w in v.warnings)
    assert v.human_agreement == ()
    assert "validity_control_rates" in report_frames(report)
    html = render_html(report)
    assert "Judge validity" in html and "Rogan" in html
    # The forest plots: one row per judge and the jury, every whisker of some length.
    charts = validity_charts(v)
    assert [c.title.split(" ")[0] for c in charts.shown] == ["Sensitivity", "Specificity", "Pass"]
    assert [r.label for r in charts.shown[0].rows] == ["j1", "j2", "jury (mean)"]
    assert all(r.whisker and r.whisker[0] != r.whisker[1] for c in charts.shown[:2] for r in c.rows)
    assert "Sensitivity on control runs" in html and "Specificity per known-bad variant" in html
    assert "<dt>corrected_pass_shares</dt>" in html and "errors depend only on the run" in html
    # The declarations survive a snapshot.
    state = state_from_json(state_to_json(p.state))
    assert state.controls == p.state.controls


def test_a_campaign_without_controls_or_humans_has_no_section() -> None:
    events, _ = _log()
    plain = [e for e in events if not isinstance(e, ControlDeclared)]
    p = Projections(_fold(plain))
    assert judge_validity(p, [C], AnalysisSettings(seed=1, n_resamples=50)) is None
    assert "Judge validity" not in render_html(build_report(p, campaign=C, n_resamples=50))


def test_human_verdicts_are_measured_against_each_judge_and_the_jury() -> None:
    events, _ = _log(humans=True)
    p = Projections(_fold(events))
    v = judge_validity(p, [C], AnalysisSettings(seed=1, n_resamples=100))
    assert v is not None
    subjects = {(r.subject_kind, r.subject, r.runs): r for r in v.human_agreement}
    judges = {("judge", "j1"), ("judge", "j2"), ("jury", "")}
    assert set(subjects) == {(*s, runs) for s in judges for runs in ("agents", "controls")}
    # Agents' runs: 3 good (even tasks), 3 bad; controls: 6 known-good, 6 known-bad.
    agents, controls = subjects[("judge", "j2", "agents")], subjects[("judge", "j2", "controls")]
    assert (agents.both_pass, agents.both_fail, agents.n_runs) == (3, 3, 6)
    assert (controls.both_pass, controls.both_fail, controls.n_runs) == (6, 6, 12)
    assert agents.kappa == 1.0 == controls.kappa and agents.pabak == 1.0
    # j1 passes everything: it agrees with the reviewer on half the pairs (PABAK 0), and
    # κ is 0 with a pass share of 100% against the reviewer's 50%: a prevalence warning.
    j1 = subjects[("judge", "j1", "agents")]
    assert (j1.subject_pass_share, j1.human_pass_share, j1.pabak, j1.kappa) == (1.0, 0.5, 0.0, 0.0)
    assert any(
        w.kind == "kappa_prevalence" and w.subject == "j1" and "on agents' runs" in w.message
        for w in v.warnings
    )
    assert {b.runs for b in v.human_bias} == {"agents", "controls"}
    # The reviewer is no LLM judge: never in the controls' judges, never in agent scores.
    assert "reviewer-ann" not in set(control_frame(p, [C])["judge_id"])
    assert "Agreement with human verdicts" in render_html(
        build_report(p, campaign=C, n_resamples=50)
    )


def test_a_retried_control_is_measured_on_its_latest_attempt() -> None:
    """`assay retry` reruns an infrastructure-failed control as attempt 1 (a new run id);
    the declaration names attempt 0, and validity follows it to the attempt judged."""
    events, _ = _log(n_tasks=1)
    good = next(e for e in events if isinstance(e, RunRequested) and e.agent.agent_id == "g0")
    # Attempt 0 failed before any verdict: drop its seal and verdicts, fail it, retry it.
    events = [
        e
        for e in events
        if not (e.run_id == good.run_id and e is not good and not isinstance(e, ControlDeclared))
    ]
    events.append(
        RunFailed(
            event_id="rf",
            campaign_id=C,
            run_id=good.run_id,
            task_id="t0",
            stage="sandbox",
            error="node lost",
            infrastructure=True,
            producer=P,
        )
    )
    rid = run_id_for(C, "t0", good.agent.agent_id, 0, 1)
    retry = good.model_copy(
        update={"event_id": RunRequested.id_for(rid), "run_id": rid, "attempt": 1}
    )
    events += [retry, _sealed(retry), _verdict(retry, "j1", 9), _verdict(retry, "j2", 9)]
    p = Projections(_fold(events))
    frame = control_frame(p, [C])
    assert rid in set(frame["run_id"]) and good.run_id not in set(frame["run_id"])
    assert set(frame.filter(pl.col("run_id") == rid)["variant"]) == {"reference"}
    assert rid not in set(p.statistics_tables([C]).runs["run_id"]), "still no agent's run"


def test_controls_are_known_by_their_declaration_in_any_order() -> None:
    """Issue #47: a control's request carries nothing of it; the declaration, folded
    before or after the request and its retry, makes the run a control."""
    events, ids = _log(n_tasks=2)
    declared = [e for e in events if isinstance(e, ControlDeclared)]
    later = [e for e in events if not isinstance(e, ControlDeclared)] + declared
    for log in (events, later):
        p = Projections(_fold(log))
        assert set(p.control_runs()) == ids["controls"]
        assert set(control_frame(p, [C])["run_id"]) == ids["controls"]


def test_an_empty_log_has_no_section() -> None:
    """The aggregator reports before any campaign is in (a fresh deployment)."""
    p = Projections(_fold([]))
    assert judge_validity(p, [], AnalysisSettings(seed=1, n_resamples=10)) is None
    assert build_report(p, n_resamples=10).validity is None


def test_human_verdicts_and_controls_survive_a_snapshot() -> None:
    events, _ = _log(n_tasks=2, humans=True)
    state = Projections(_fold(events)).state
    again = state_from_json(state_to_json(state))
    assert again.human_verdicts == state.human_verdicts and len(state.human_verdicts) == 6
    assert again.controls == state.controls


def test_a_reader_without_the_controls_secret_knows_no_control() -> None:
    """A judge's or reviewer's fold: declarations counted per task, no run a control."""
    events, _ = _log(n_tasks=2)
    state = fold(enumerate(events, 1))
    assert not state.controls
    # The log's second declaration of a run repeats its id: refused as a repeat, unopened.
    assert all("repeat of event" in r.reason for r in state.refused.values())
    assert not any(r.control_plan for r in state.runs.values())
    assert state.declared_controls == {f"{C}/t0": 3, f"{C}/t1": 3}


def test_a_declaration_that_does_not_open_is_refused_and_the_fold_goes_on() -> None:
    """Another deployment's declaration and a tampered one are refused (SealBroken)."""
    events, ids = _log(n_tasks=1)
    declared = [e for e in events if isinstance(e, ControlDeclared)]
    foreign = ControlsKey(b"x" * 32).declare(
        KEY.open(declared[0]).model_copy(update={"control_run_id": "r-foreign"}),
        causation_id=None,
        producer=P,
    )
    body = declared[1].sealed
    flipped = body[:20] + ("A" if body[20] != "A" else "B") + body[21:]
    tampered = declared[1].model_copy(update={"sealed": flipped})
    log = [e for e in events if e is not declared[1]] + [foreign, tampered]
    state = _fold(log)
    reasons = [r.reason for r in state.refused.values()]
    assert sum("SealBroken" in r for r in reasons) == 3, reasons  # and _log's forgery
    assert "r-foreign" not in state.controls
    assert ids["controls"] - {KEY.open(declared[1]).control_run_id} <= set(state.controls)
    assert state.last_sequence == len(log)


def test_control_agents_listed_in_the_roster_are_no_agents_of_the_report() -> None:
    """Issue #47: the published roster lists each control agent like an agent; a reader
    that opens the declarations takes it out (agent tables, counts) and expects only its
    declared runs, whichever of the campaign and the declarations it folds first."""
    events, ids = _log(n_tasks=2)
    listed = [
        SPEC.agents[0].model_copy(update={"agent_id": f"{k}{t}"}) for k in "gb" for t in range(2)
    ]
    spec = SPEC.model_copy(
        update={"agents": [*SPEC.agents, *listed], "controls": ControlsSpec(agents=4)}
    )
    started = CampaignStarted(event_id="cs", campaign_id=C, campaign=spec, producer=P)
    declared = [e for e in events if isinstance(e, ControlDeclared)]
    rest = [e for e in events[1:] if not isinstance(e, ControlDeclared)]
    for log in ([started, *declared, *rest], [*declared, started, *rest]):
        state = _fold(log)
        assert [a["agent_id"] for a in state.campaigns[C]["agents"]] == ["agent"]
        assert set(Projections(state).control_runs()) == ids["controls"]
        history = state.histories[C]
        assert history.expected_runs == 2 + len(ids["controls"])
        assert history.expected == ids["agent"] | ids["controls"]

    # The roster is read from the campaign's history, the one fold of a campaign: read
    # before the declarations, it lists every agent; read after, no control agent.
    state = fold(enumerate([started], 1), State(controls_key=KEY))
    assert len(state.campaigns[C]["agents"]) == 5
    fold(enumerate([*declared, *rest], 2), state)
    assert [a["agent_id"] for a in state.campaigns[C]["agents"]] == ["agent"]
    assert state_from_json(state_to_json(state)).campaigns == state.campaigns


def _first_step(r: RunRequested, sealed: str | None) -> AgentStepLogged:
    return AgentStepLogged(
        event_id=AgentStepLogged.id_for(r.run_id, 0),
        campaign_id=C,
        run_id=r.run_id,
        task_id=r.task_id,
        step=0,
        sealed_choice=sealed,
        producer=P,
    )


def test_a_control_is_labelled_by_the_plan_its_first_step_chose_in_any_order() -> None:
    """Issue #47: a control that chooses at its first step which of its task's plans it
    plays is measured as that plan's variant, whatever its declaration said and wherever
    the step falls in the log; a choice sealed for another run, under another secret, or
    naming no plan of its task, relabels nothing."""
    events, ids = _log(n_tasks=3)
    runs = {e.agent.agent_id: e for e in events if isinstance(e, RunRequested)}
    good, bad, agent = runs["g0"], runs["b0"], runs["agent"]
    swapped = [
        _first_step(good, KEY.seal_choice(C, good.run_id or "", PLAN["bad"])),  # chose the bad
        _first_step(bad, KEY.seal_choice(C, bad.run_id or "", PLAN["good"])),  # chose the good
        _first_step(agent, KEY.seal_choice(C, agent.run_id or "", PLAN["good"])),  # not a control
    ]
    attacks = [
        # g1's choice moved onto b1's step; b1 forged under another secret; g2 names a plan
        # that is no plan of its task; an agent's run "choosing" a plan stays an agent's.
        _first_step(runs["b1"], KEY.seal_choice(C, runs["g1"].run_id or "", PLAN["good"])),
        _first_step(runs["g1"], FORGER.seal_choice(C, runs["g1"].run_id or "", PLAN["bad"])),
        _first_step(runs["g2"], KEY.seal_choice(C, runs["g2"].run_id or "", "e" * 64)),
    ]
    first = events[:2] + swapped + attacks + events[2:]
    for log in (events + swapped + attacks, first):
        p = Projections(_fold(log))
        frame = control_frame(p, [C])
        variant = dict(zip(frame["run_id"], frame["variant"], strict=False))
        expected = dict(zip(frame["run_id"], frame["expected"], strict=False))
        assert variant[good.run_id] == "altered_numbers" and expected[good.run_id] == "fail"
        assert variant[bad.run_id] == "reference" and expected[bad.run_id] == "pass"
        assert variant[runs["b1"].run_id] == "altered_numbers"
        assert variant[runs["g1"].run_id] == "reference"
        assert variant[runs["g2"].run_id] == "reference"
        assert set(frame["run_id"]) == ids["controls"], "an agent's run never becomes a control"
        state = state_from_json(state_to_json(p.state))
        assert state.runs[good.run_id].control_plan == PLAN["bad"]
    # A reader without the secret: the same step folds, and no run is a control.
    blind = fold(enumerate(events + swapped, 1))
    assert not any(r.control_plan or r.chosen_plan for r in blind.runs.values())


def test_a_sealed_choice_is_the_same_length_for_a_control_and_an_agent_and_opens_nowhere_else() -> (
    None
):
    """What a judge reads of a first step is the same for both: one length, no tell."""
    plan = "ab" * 32
    control = KEY.seal_choice(C, "r1", plan)
    agent = KEY.seal_choice(C, "r2", None)
    assert len(control) == len(agent) == SEALED_CHOICE_CHARS
    assert KEY.open_choice(C, "r1", control) == plan and KEY.open_choice(C, "r2", agent) is None
    assert KEY.seal_choice(C, "r1", plan) != control, "a fresh nonce each time"
    for reader, run in ((FORGER, "r1"), (KEY, "r2")):
        with pytest.raises(SealBroken):
            reader.open_choice(C, run, control)
    with pytest.raises(ValidationError):
        AgentStepLogged(
            event_id="x", campaign_id=C, run_id="r1", step=0, sealed_choice="x" * 81, producer=P
        )
