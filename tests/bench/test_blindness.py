"""Blind means blind (issue #47): measured, not asserted.

The bundled campaign (examples/campaign.yaml: every bundled task, its references'
controls, the scripted cast) runs through the real stack; then everything a judge
service or a reviewer can read of each run (`bench.blindness.run_features`) goes to a
cross-validated logistic regression that tries to tell the controls from the agents'
runs. At chance its AUC is 0.5; the platform promises at most 0.6.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from assay_judge.delimit import final_message_block
from assay_report.statistics import RULE_CHECKS
from assay_schemas import (
    DERIVED_VARIANTS,
    SEALED_CHOICE_CHARS,
    AgentStepLogged,
    ArtifactsSealed,
    Event,
    FileRef,
    RunRequested,
    Task,
    ToolCallRecord,
)
from assay_testing.events import TEST_PRODUCER, run_requested
from bench.blindness import (
    Blindness,
    BlindnessWarning,
    Campaign,
    blindness_auc,
    bundled_campaign,
    control_labels,
    group_aucs,
    openings_no_agent_made,
    run_features,
    top_tells,
)
from bench.blindness_model import Classifier

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]
CHANCE = 0.6
"""The most AUC a classifier may reach on what judges and reviewers read."""
FOREST_BOUND = 0.65
"""The random forest on the larger campaign, as the mean of `FOREST_REPEATS`
cross-validations: 0.44-0.60 over fifteen campaigns (0.44-0.57 over the six of them with
a control's habits its look-alike's own first) and 0.50-0.62 over three earlier, all on
2026-12-07; 0.43-0.52 over eight since a control plays no kind its look-alike never did,
waiting for its look-alike's first answer in its drive, and 0.49-0.58 over three waiting
aside. With the labels shuffled the same measure reads 0.50 with a standard deviation of
0.04-0.05 (twelve shuffles of each of five campaigns, largest 0.61): the bound is about
three of those above chance, so the test catches a tell coming back (0.71-0.82 before
controls chose their plans) without failing on a campaign's own spread. Step timings
carry a weak tell in some campaigns (the forest 0.578 with them, 0.551 without, in one;
0.551 against 0.512 in another; none in three), held-out permutation importances of
0.01-0.015 AUC at most. One split into folds alone moved a single cross-validation by
±0.04 on the same runs (single splits read 0.43-0.651 over seven campaigns, one CI run
failing at 0.651), so the mean of several is taken, the bound unchanged."""
UNSEEN_OPENINGS = 8
"""The most controls of the larger campaign's 120 that may open with a tool no run of
their model opened with."""
FOREST_REPEATS = 5
"""Cross-validations (each its own split and forest seed) whose mean AUC the larger
campaign's forest is held to."""


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campaign]:
    ran = bundled_campaign(tmp_path_factory.mktemp("bundled"))
    try:
        yield ran
    finally:
        ran.server.stop()


def _measure(ran: Campaign) -> tuple[Blindness, list[tuple[str, float]]]:
    features = run_features(ran.events)
    controls = control_labels(ran.controls)
    assert controls and controls <= set(features), "every control is a run of the log"
    found = blindness_auc(features, controls, seed=47)
    print(f"\nAUC by feature group: {group_aucs(features, controls, seed=47)}")
    return found, top_tells(features, controls)


def test_a_classifier_cannot_tell_controls_from_agents_runs_in_the_bundled_campaign(
    bundled: Campaign,
) -> None:
    """Each home draws its own controls secret (its look-alikes, ids and slots): over eight
    salts the AUC was 0.23-0.46 (2026-12-05) once a control imitates the runs on tasks
    like its own (files attached or not); 0.23-0.46 over four with each kind wearing every
    look-alike in turn; 0.27-0.47 over ten since a control waits for its look-alike's
    first answer and never plays a kind its look-alike never did (2026-12-07: one CI
    run read 0.643 before, six of its eight controls wearing the careful agent answering
    as that agent never did)."""
    found, tells = _measure(bundled)
    print(
        f"\nbundled: AUC {found.auc:.3f} ({found.n_controls} controls, "
        f"{found.n_agent_runs} agents' runs, {found.folds} folds); tells: {tells[:5]}"
    )
    assert found.n_controls >= 8 and found.n_agent_runs >= 8
    assert found.auc <= CHANCE, f"AUC {found.auc:.3f}: controls are told by {tells[:5]}"
    # Every run's first step seals a choice of one length, a control's plan or an agent's
    # blank: a feature like any other, the same for all.
    sealed = {f["steps.sealed_choice_chars"] for f in run_features(bundled.events).values()}
    assert sealed == {float(SEALED_CHOICE_CHARS)}, sealed


@pytest.mark.slow
def test_a_classifier_cannot_tell_controls_apart_in_a_larger_campaign(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The bundled campaign at three epochs of agents and of controls (72 agents' runs,
    120 controls): more runs, so a weaker tell is found too, and one that only a
    combination of fields carries (the forest). Until each control chose its plan by the
    kinds of work its look-alike does (`assay_runner.choice`), the forest told them at
    0.71-0.82 over three campaigns (2026-12-05), first by who does which kind of work;
    since, see `FOREST_BOUND`. On a failure the forest's tells are named as they weigh
    held out (`top_tells`), not by its impurity importances, which name fields with many
    values (latencies, durations) first whether or not they tell."""
    ran = bundled_campaign(
        tmp_path_factory.mktemp("larger"), {"epochs": 3, "controls": {"epochs": 3}}
    )
    ran.server.stop()
    found, tells = _measure(ran)
    print(
        f"\nlarger: AUC {found.auc:.3f} ({found.n_controls} controls, "
        f"{found.n_agent_runs} agents' runs); tells: {tells[:5]}"
    )
    features = run_features(ran.events)
    controls = control_labels(ran.controls)
    forest = blindness_auc(features, controls, seed=47, classifier="forest", repeats=FOREST_REPEATS)
    print(f"\nlarger, random forest: AUC {forest.auc:.3f}")
    assert found.n_controls >= 100 and found.n_agent_runs >= 60
    # Controls chose their plans, and every variant was still played and measured.
    played = {r["variant"] for r in ran.report["validity"]["control_rates"]}
    assert played >= {"reference", *DERIVED_VARIANTS}, played
    # 9-17 of 120 controls a campaign opened with a tool no run of their model opens with
    # while a control could play a kind its look-alike never did, 0-3 over eight since and
    # none over three once it waits aside (2026-12-07; see `openings_no_agent_made`): the
    # bound catches that coming back.
    unseen = openings_no_agent_made(features, controls)
    print(f"\nlarger: {len(unseen)} controls open as no run of their model: {unseen[:8]}")
    assert len(unseen) <= UNSEEN_OPENINGS, unseen
    assert found.auc <= CHANCE, f"AUC {found.auc:.3f}: controls are told by {tells[:5]}"
    if forest.auc > FOREST_BOUND:  # what told them, held out (a cross-validation's fits)
        forest_tells = top_tells(features, controls, classifier="forest")
        pytest.fail(f"forest AUC {forest.auc:.3f}: told by {forest_tells[:5]}")


def test_every_rule_check_has_a_validity_row_and_the_reference_control_runs_its_code(
    bundled: Campaign,
) -> None:
    """Issue #47 item 5: the reference control runs its scripts as a careful agent does,
    so 'scripts_executed' is measured on controls like every other rule check."""
    rates = bundled.report["validity"]["rule_rates"]
    rows = {(r["judge_id"], r["measure"]): r for r in rates if r["variant"] is None}
    for check in RULE_CHECKS:
        assert (f"rules:{check}", "sensitivity") in rows, check
    executed = rows[("rules:scripts_executed", "sensitivity")]
    assert executed["estimate"] == 1.0, executed
    by_variant = {(r["judge_id"], r["variant"], r["measure"]): r for r in rates}
    caught = by_variant[("rules:scripts_executed", "not_executed", "specificity")]
    assert caught["estimate"] == 1.0, caught


def test_the_auc_is_the_mann_whitney_statistic_of_the_out_of_fold_scores() -> None:
    """An independent computation: AUC = U / (n_pos · n_neg) (ties count one half)."""
    rng = np.random.default_rng(3)
    features = {f"r{i}": {"x": float(rng.normal(i % 2, 1.0)), "tag": "a"} for i in range(40)}
    controls = {f"r{i}" for i in range(40) if i % 2}
    found = blindness_auc(features, controls, seed=1)
    pos = [s for s, y in zip(found.scores, found.labels, strict=True) if y]
    neg = [s for s, y in zip(found.scores, found.labels, strict=True) if not y]
    u = mannwhitneyu(pos, neg).statistic
    assert found.auc == pytest.approx(u / (len(pos) * len(neg)), abs=1e-12)
    assert found.auc > 0.6, "a planted difference is found"


def test_a_planted_tell_is_found_and_noise_stays_at_chance() -> None:
    rng = np.random.default_rng(7)
    noise = {f"r{i}": {"x": float(rng.normal()), "y": float(rng.normal())} for i in range(200)}
    controls = {f"r{i}" for i in range(0, 200, 4)}
    assert blindness_auc(noise, controls, seed=2).auc <= CHANCE
    told = {
        r: {**f, "agent.model": "control" if r in controls else "gpt"} for r, f in noise.items()
    }
    assert blindness_auc(told, controls, seed=2).auc > 0.95


def test_a_tell_carried_only_by_a_combination_is_found_by_the_forest() -> None:
    """Controls that differ from agents' runs in no field alone, only in a combination
    (ran code but wrote nothing, or wrote but never ran: an exclusive or): the regression
    stays at chance, the forest finds them. Its AUC is the Mann-Whitney statistic of its
    out-of-fold scores, as the regression's."""
    rng = np.random.default_rng(11)
    features: dict[str, dict[str, float | str]] = {}
    controls: set[str] = set()
    for i in range(240):
        ran, wrote = int(rng.integers(2)), int(rng.integers(2))
        run = f"r{i}"
        features[run] = {"ran": float(ran), "wrote": float(wrote), "x": float(rng.normal())}
        if ran != wrote:
            controls.add(run)
    linear = blindness_auc(features, controls, seed=3)
    forest = blindness_auc(features, controls, seed=3, classifier="forest")
    assert linear.auc <= CHANCE, "no field tells alone"
    assert forest.auc > 0.95, "the combination does"
    pos = [s for s, y in zip(forest.scores, forest.labels, strict=True) if y]
    neg = [s for s, y in zip(forest.scores, forest.labels, strict=True) if not y]
    assert forest.auc == pytest.approx(
        mannwhitneyu(pos, neg).statistic / (len(pos) * len(neg)), abs=1e-12
    )
    names = [name for name, _ in top_tells(features, controls, 2, classifier="forest")]
    assert sorted(names) == ["ran", "wrote"]


def test_the_forests_tells_are_what_tells_held_out_not_what_has_many_values() -> None:
    """A field that tells (a binary one, a control's more often) beside fields of pure
    noise with a distinct value per run: a forest's impurity importances rank the noise
    first (scikit-learn's, computed here beside), the held-out permutation importances
    that `top_tells` gives rank the tell first, and none of the noise weighs near it."""
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(3)
    runs = [f"r{i:03d}" for i in range(180)]
    controls = set(runs[::3])
    features: dict[str, dict[str, float | str]] = {
        run: {
            "b": float(rng.random() < (0.75 if run in controls else 0.35)),
            **{f"noise{j}": float(rng.normal()) for j in range(6)},
        }
        for run in runs
    }
    names = ["b", *(f"noise{j}" for j in range(6))]
    x = np.array([[features[r][k] for k in names] for r in runs])
    y = np.array([r in controls for r in runs])
    impurity = RandomForestClassifier(n_estimators=300, min_samples_leaf=2, random_state=0)
    by_impurity = dict(zip(names, impurity.fit(x, y).feature_importances_, strict=True))
    assert max(by_impurity, key=by_impurity.__getitem__) != "b", by_impurity

    tells = top_tells(features, controls, 3, classifier="forest")
    assert tells[0][0] == "b", tells
    assert tells[0][1] > 0.05 and tells[1][1] < tells[0][1] / 2, tells


@pytest.mark.parametrize("classifier", ["logistic", "forest"])
def test_repeated_cross_validation_is_the_mean_of_its_repeats(classifier: Classifier) -> None:
    """`repeats` averages that many cross-validations, each with its own split and model
    seed: by hand, the mean of the single ones at the seeds in turn; a weak tell's AUC
    moves between splits, and the mean lies within them."""
    rng = np.random.default_rng(5)
    controls = {f"r{i}" for i in range(90) if i % 3 == 0}
    features: dict[str, dict[str, float | str]] = {
        f"r{i}": {"x": float(rng.normal()) + 0.8 * (f"r{i}" in controls), "y": float(rng.normal())}
        for i in range(90)
    }
    each = [blindness_auc(features, controls, seed=s, classifier=classifier).auc for s in (7, 8, 9)]
    found = blindness_auc(features, controls, seed=7, classifier=classifier, repeats=3)
    assert found.repeats == 3 and len(set(each)) > 1
    assert found.auc == pytest.approx(float(np.mean(each)), abs=1e-12)
    assert min(each) <= found.auc <= max(each)


def test_too_few_controls_warn_and_carry_no_auc() -> None:
    features = {f"r{i}": {"x": float(i)} for i in range(10)}
    with pytest.warns(BlindnessWarning, match="at least"):
        found = blindness_auc(features, {"r1", "r2"})
    assert np.isnan(found.auc) and found.warnings


_RUN_ID = re.compile(r"\br[0-9a-f]{24}\b")


def _seals(events: list[Event]) -> dict[str, ArtifactsSealed]:
    return {e.run_id: e for e in events if isinstance(e, ArtifactsSealed) and e.run_id}


def _first_turns(server: object, model: str) -> list[str]:
    """The judge's opening requests (the case, before any tool call), run ids masked."""
    out = []
    for rec in server.requests(model):  # type: ignore[attr-defined]
        if not any(m["role"] == "assistant" for m in rec.body["messages"]):
            out.append(_RUN_ID.sub("<run>", json.dumps(rec.body, sort_keys=True)))
    return out


def test_a_control_and_an_agents_run_with_the_same_work_reach_the_judge_alike(
    bundled: Campaign,
) -> None:
    """Where a control and an agent's run on its task sealed the same files and message
    (the reference control and the careful agent's run, the prose-only control and the
    empty agent's, ...), the judge's model server received the same opening request about
    each, byte for byte once run ids are masked."""
    events = bundled.events
    seals = _seals(events)
    declared = {d.control_run_id: d for d in bundled.controls}
    requested = {e.run_id: e for e in events if isinstance(e, RunRequested) and e.run_id}
    opening = _first_turns(bundled.server, "scripted-judge-balanced")

    def work(run: str) -> tuple[frozenset[tuple[str, str]], str]:
        seal = seals[run]
        return frozenset((f.path, f.sha256) for f in seal.files), seal.final_message

    pairs = 0
    for run, control in declared.items():
        alike = [
            r
            for r, e in requested.items()
            if r not in declared and e.task_id == control.task_id and work(r) == work(run)
        ]
        if not alike:
            continue
        pairs += 1
        files, message = work(run)
        said = json.dumps(final_message_block(message))[1:-1]  # as the case quotes it
        # A body naming a file this work did not leave is another run's (more files, the
        # same message): the runs that did this same work, the control among them, must
        # have sent one body, the same for all.
        others = {
            f.sha256[:12]
            for r, e in requested.items()
            if e.task_id == control.task_id
            for f in seals[r].files
        } - {sha[:12] for _, sha in files}
        others -= {a.sha256[:12] for a in requested[run].task.attachments}  # every case's
        about = [
            b
            for b in opening
            if f"task {control.task_id})" in b
            and all(sha[:12] in b for _, sha in files)
            and not any(sha in b for sha in others)
            and said in b
        ]
        same = [
            r for r, e in requested.items() if e.task_id == control.task_id and work(r) == work(run)
        ]
        assert list(Counter(about).values()) == [len(same)], (control.task_id, control.variant)
    assert pairs >= 4, f"only {pairs} controls that left the work of an agent's run"


def test_a_reader_of_the_log_sees_repeated_work_and_the_shape_of_call_ids() -> None:
    """Two fields a reader of the whole log has that no single run shows: how many other
    runs left the same files and answer (a control repeated on a task leaves the same each
    time; a sampled model's runs differ), and the shape of the tool-call ids (an API's
    own: a control naming its calls `call_0_0` beside `call_Xy3…` is told at once)."""
    events: list[Event] = []
    for i, (files, answer, call) in enumerate(
        [
            ({"a.csv": "1"}, "same", "call_0_0"),
            ({"a.csv": "1"}, "same", "call_0_0"),
            ({"a.csv": "2"}, "other", "call_Zq81LmT0aXc4vB2nQ9rE5sPk"),
        ]
    ):
        run = f"r{i}"
        events.append(run_requested(run, campaign_id="c", task=Task(task_id="t", prompt="p")))
        events.append(
            AgentStepLogged(
                event_id=AgentStepLogged.id_for(run, 0),
                campaign_id="c",
                run_id=run,
                step=0,
                tool_calls=[ToolCallRecord(call_id=call, name="submit", arguments="{}")],
                producer=TEST_PRODUCER,
            )
        )
        refs = [
            FileRef(path=p, sha256=hashlib.sha256(b.encode()).hexdigest(), size=1)
            for p, b in files.items()
        ]
        events.append(
            ArtifactsSealed(
                event_id=ArtifactsSealed.id_for(run),
                campaign_id="c",
                run_id=run,
                task_id="t",
                files=refs,
                final_message=answer,
                agent_id="a1",
                epoch=0,
                producer=TEST_PRODUCER,
            )
        )
    features = run_features(events)
    assert [features[r]["repeats.same_files"] for r in ("r0", "r1", "r2")] == [1.0, 1.0, 0.0]
    assert [features[r]["repeats.same_message"] for r in ("r0", "r1", "r2")] == [1.0, 1.0, 0.0]
    assert features["r0"]["calls.id_len"] == 8.0 and features["r2"]["calls.id_len"] == 29.0
    assert features["r0"]["calls.id_letters"] == 0.5 < features["r2"]["calls.id_letters"]
    assert features["r0"]["calls.id_prefix"] == features["r2"]["calls.id_prefix"] == "call"


def test_a_reader_sees_how_a_transcript_opens() -> None:
    """The tools a run's first two steps call first and the step that first writes, in
    step order whatever order the log holds them in; a run with no step has none."""
    events: list[Event] = [
        run_requested("r0", campaign_id="c", task=Task(task_id="t", prompt="p")),
        run_requested("r1", campaign_id="c", task=Task(task_id="t", prompt="p")),
    ]
    for step, names in ((2, ["write_file", "bash"]), (0, ["read_file"]), (1, ["list_files"])):
        calls = [
            ToolCallRecord(call_id=f"c{step}{i}", name=n, arguments="{}")
            for i, n in enumerate(names)
        ]
        events.append(
            AgentStepLogged(
                event_id=AgentStepLogged.id_for("r0", step),
                campaign_id="c",
                run_id="r0",
                step=step,
                tool_calls=calls,
                producer=TEST_PRODUCER,
            )
        )
    features = run_features(events)
    opened = {k: v for k, v in features["r0"].items() if k.startswith("transcript.first")}
    assert opened == {"transcript.first_tool": "read_file", "transcript.first_write_step": 2.0}
    assert features["r0"]["transcript.second_tool"] == "list_files"
    assert features["r1"]["transcript.first_tool"] == features["r1"]["transcript.second_tool"] == ""
    assert features["r1"]["transcript.first_write_step"] == -1.0


def test_a_control_opening_as_no_run_of_its_model_is_named() -> None:
    """`openings_no_agent_made`: by hand, the controls whose (model, first tool) no
    agent's run has; a control opening as another model's runs do is one of them."""
    features: dict[str, dict[str, float | str]] = {
        "a1": {"agent.model": "careful", "transcript.first_tool": "bash"},
        "a2": {"agent.model": "writer", "transcript.first_tool": "write_file"},
        "c1": {"agent.model": "careful", "transcript.first_tool": "bash"},
        "c2": {"agent.model": "careful", "transcript.first_tool": "write_file"},
        "c3": {"agent.model": "writer", "transcript.first_tool": "write_file"},
        "c4": {"agent.model": "writer", "transcript.first_tool": ""},
    }
    unseen = openings_no_agent_made(features, {"c1", "c2", "c3", "c4"})
    assert unseen == [("careful", "write_file"), ("writer", "")]
