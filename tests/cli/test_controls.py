"""Control runs through the real stack: judged blind, counted only in judge validity.

One campaign over three bundled tasks with `controls:` (the bundled references and their
known-bad variants), the demo's agents, one demo judge and a planted judge. The planted
judge sees only what every judge sees; it tells good work from bad by content (the
reference message's substance, whatever its opening label, with every reference file
present) and passes good work with
probability 0.9, bad work with 0.3 (a hash of the case), scoring 9/7 on good and 8/2 on
bad work, so each verdict says both what the judge classified and whether it passed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml
from rich.console import Console

from assay.config import Settings
from assay.tasks import answer_substance
from assay_cli.commands._home import home_settings
from assay_cli.commands._report import _projections
from assay_cli.run import run_campaign
from assay_report.validity import control_frame
from assay_schemas import DERIVED_VARIANTS, default_rubric
from assay_testing.demo import agent_scripts, judge_scripts
from assay_testing.scripted import ScriptedModelServer, ScriptReply, ScriptRequest

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[2]
TASKS = ("power_analysis_plan", "protocol_review", "qpcr_ddct")
AGENTS = ("careful", "overclaimer", "empty")
DIMENSIONS = [d.key for d in default_rubric().dimensions]
REFERENCES = {t: (ROOT / "examples" / "references" / t / "message.md").read_text() for t in TASKS}
N_FILES = {
    t: sum(1 for p in (ROOT / "examples" / "references" / t).rglob("*") if p.is_file()) - 1
    for t in TASKS
}
_FINAL = re.compile(r"<final_message>(.*?)</final_message>", re.DOTALL)
_PRODUCED = re.compile(r"^- .+?  \(\d+ bytes.*sha256 [0-9a-f]{12}\)$", re.MULTILINE)
_TASK = re.compile(r"^# The scientist's request \(task (\S+)\)", re.MULTILINE)


def _case(request: ScriptRequest) -> str:
    return request.opening_text


def _good(case: str) -> bool:
    """The reference's message with as many produced files as the reference has."""
    task = m.group(1) if (m := _TASK.search(case)) else ""
    final = m.group(1).strip() if (m := _FINAL.search(case)) else ""
    produced = [line for line in _PRODUCED.findall(case) if "[attachment" not in line]
    want = (
        REFERENCES.get(task, "")
        .strip()
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
    )
    # The answer's substance: a control opens it in its look-alike's house style.
    return answer_substance(final) == answer_substance(want) and len(produced) >= N_FILES.get(
        task, 1
    )


def planted(request: ScriptRequest) -> ScriptReply:
    """Good work: 9 (passed, p 0.9) or 7; bad work: 8 (passed, p 0.3) or 2."""
    case = _case(request)
    good = _good(case)
    u = int.from_bytes(hashlib.sha256(b"planted|" + case.encode()).digest()[:8]) / 2**64
    passed = u < (0.9 if good else 0.3)
    score = (9 if passed else 7) if good else (8 if passed else 2)
    scores = {d: {"score": score, "reason": "planted"} for d in DIMENSIONS}
    verdict = {"scores": scores, "failure_tags": [], "rationale": "planted", "files_relied_on": []}
    return ScriptReply.call("submit_verdict", verdict)


class Finished(NamedTuple):
    report: Any
    state: Any
    projections: Any
    server: ScriptedModelServer
    stdout: str


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Finished]:
    tmp = tmp_path_factory.mktemp("controls")
    campaign = yaml.safe_load((ROOT / "examples" / "campaign.yaml").read_text())
    campaign["campaign_id"] = "controls"
    # Declared variants: the figures below are checked against planted verdicts per run,
    # and a control choosing its plan (blindness bench) would make them vary run to run.
    campaign["controls"] = {
        "references": str(ROOT / "examples" / "references"),
        "like_agents": False,
    }
    campaign["judges"] = [j for j in campaign["judges"] if j["judge_id"] == "judge-balanced"] + [
        {"judge_id": "judge-planted", "provider": "openai", "model": "scripted-judge-planted"}
    ]
    path = tmp / "campaign.yaml"
    path.write_text(yaml.safe_dump(campaign))
    server = ScriptedModelServer(
        {
            **agent_scripts(ROOT / "examples"),
            **judge_scripts(),
            "scripted-judge-planted": planted,
        }
    ).start()
    state = Path(tempfile.mkdtemp(prefix="ctl-", dir="/tmp"))
    state.chmod(0o711)
    settings = Settings(home=tmp / "home", state_dir=state)
    console = Console(record=True, width=200)
    try:
        outcome = run_campaign(
            [ROOT / "examples" / "tasks" / t for t in TASKS],
            path,
            settings=settings,
            console=console,
            timeout_s=500,
            scripted_server=server,
        )
        report = json.loads(outcome.report_json.read_text())
        with home_settings(outcome.workdir) as reopened:  # the whole log, folded afresh
            projections = asyncio.run(_projections(reopened, fresh=True))
        yield Finished(report, projections.state, projections, server, console.export_text())
    finally:
        server.stop()


def test_controls_run_and_stay_out_of_agent_statistics(finished: Finished) -> None:
    r, state = finished.report, finished.state
    kinds = sorted(c.kind for c in state.controls.values())
    # Every task's reference makes the known-good control and every derived variant.
    assert kinds == sorted(["reference", *DERIVED_VARIANTS] * len(TASKS))
    controls = {c.run_id for c in state.controls.values()}
    assert all(state.runs[run].sealed for run in controls)
    assert r["run_states"] == [{"n_runs": len(TASKS) * len(AGENTS), "state": "judged"}]
    assert {a["agent_id"] for a in r["agents"]} == set(AGENTS)
    assert {
        (s["agent_id"], s["n_tasks"], s["n_runs"]) for s in r["statistics"]["agent_scores"]
    } == {(a, len(TASKS), len(TASKS)) for a in AGENTS}
    assert all(j["n_runs"] == len(TASKS) * len(AGENTS) for j in r["judges"])
    assert "Judge validity" in finished.stdout


def test_the_planted_judge_classifies_controls_as_declared(finished: Finished) -> None:
    """Seeing only the case, the planted judge calls each control what its hidden label
    says: the derivation makes what it claims, and the judge could not have peeked."""
    frame = control_frame(finished.projections, ["controls"])
    planted_rows = frame.filter(frame["judge_id"] == "judge-planted")
    assert planted_rows.height == len(finished.state.controls)
    for row in planted_rows.iter_rows(named=True):
        said_good = row["score"] in (9.0, 7.0)
        assert said_good == (row["expected"] == "pass"), row


def test_report_rates_and_correction_equal_the_planted_verdicts(finished: Finished) -> None:
    v = finished.report["validity"]
    frame = control_frame(finished.projections, ["controls"])
    mine = [r for r in frame.iter_rows(named=True) if r["judge_id"] == "judge-planted"]
    good = [r["score"] >= 8 for r in mine if r["expected"] == "pass"]
    bad = [r["score"] < 8 for r in mine if r["expected"] == "fail"]
    se, sp = sum(good) / len(good), sum(bad) / len(bad)
    rates = {(x["judge_id"], x["variant"], x["measure"]): x for x in v["control_rates"]}
    assert rates[("judge-planted", None, "sensitivity")]["estimate"] == pytest.approx(se, abs=1e-9)
    assert rates[("judge-planted", None, "specificity")]["estimate"] == pytest.approx(sp, abs=1e-9)
    for measure in ("sensitivity", "specificity"):
        row = rates[("judge-planted", None, measure)]
        assert row["ci_low"] <= row["estimate"] <= row["ci_high"]
    # Each agent's share is corrected by the rates on the controls that wore its family
    # (they answer in its house style), by hand from the planted verdicts.
    family = {run: r.agent_family for run, r in finished.state.runs.items()}
    scores = finished.projections.table("judgments")
    agents_family = {r["agent_id"]: family[r["run_id"]] for r in scores.iter_rows(named=True)}
    for row in v["corrected_pass_shares"]:
        if row["judge_id"] != "judge-planted":
            continue
        ours = [r for r in mine if family[r["run_id"]] == agents_family[row["agent_id"]]]
        good = [r["score"] >= 8 for r in ours if r["expected"] == "pass"]
        bad = [r["score"] < 8 for r in ours if r["expected"] == "fail"]
        if not good or not bad:
            assert _undefined(row["unclipped"]), "no control of both kinds in its style"
            continue
        se, sp = sum(good) / len(good), sum(bad) / len(bad)
        assert row["sensitivity"] == pytest.approx(se, abs=1e-9)
        assert row["specificity"] == pytest.approx(sp, abs=1e-9)
        mine_runs = scores.filter(
            (scores["judge_id"] == "judge-planted") & (scores["agent_id"] == row["agent_id"])
        )
        per_task = {}
        for t in TASKS:
            s = mine_runs.filter(mine_runs["task_id"] == t)["score"].to_list()
            per_task[t] = float(s[0] >= 8)
        q = sum(per_task.values()) / len(per_task)
        assert row["raw_share"] == pytest.approx(q, abs=1e-9)
        if se + sp > 1:
            p = (q + sp - 1) / (se + sp - 1)
            assert row["unclipped"] == pytest.approx(p, abs=1e-9)
            assert row["estimate"] == pytest.approx(min(1.0, max(0.0, p)), abs=1e-9)
        else:
            assert _undefined(row["unclipped"])


def _undefined(value: float | None) -> bool:
    """Whether a report figure says "undefined": NaN, which the report's JSON writes as
    null (`assay_report.canonical`)."""
    return value is None or math.isnan(value)


_MARKERS = (
    "altered_numbers",
    "files_removed",
    "not_executed",
    "prose_only",
    "known-good",
    "known-bad",
    "ControlDeclared",
    "control_plan",
    "control run",
)


def _shape(value: Any) -> Any:
    """The structure of a JSON value: keys and types, never the data."""
    if isinstance(value, dict):
        return tuple(sorted((k, _shape(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_shape(v) for v in value)
    return type(value).__name__


def _headings(body: dict[str, Any]) -> tuple[str, ...]:
    user = next(m for m in body["messages"] if m["role"] == "user")
    content = user["content"]
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    return tuple(re.findall(r"^# ([A-Za-z' ]+)", text, re.MULTILINE))


def test_judge_requests_cannot_tell_controls_from_agents_runs(finished: Finished) -> None:
    state = finished.state
    controls = {c.run_id for c in state.controls.values()}
    control_agents = {state.runs[r].agent_id for r in controls}
    run_ids = set(state.runs)
    # The sealed files of each run, as the judges' manifests show them (short hashes).
    produced = {
        run: frozenset(a.sha256[:12] for a in arts) for run, arts in state.artifacts.items()
    }
    kinds: dict[frozenset[str], set[str]] = {}
    for run, files in produced.items():
        kinds.setdefault(files, set()).add("control" if run in controls else "agent")
    shapes: dict[str, dict[str, set[Any]]] = {}
    for model in ("scripted-judge-planted", "scripted-judge-balanced"):
        requests = finished.server.requests(model)
        assert requests
        for rec in requests:
            text = json.dumps(rec.body)
            for marker in (*_MARKERS, *control_agents, *run_ids):
                # Whole words: the rubric's tag 'analysis_not_executed' is no marker.
                assert not re.search(rf"\b{re.escape(marker)}\b", text), (
                    f"{marker!r} reaches a judge"
                )
            case = next(m for m in rec.body["messages"] if m["role"] == "user")
            seen = frozenset(re.findall(r"sha256 ([0-9a-f]{12})", json.dumps(case)))
            kind = kinds.get(seen, {"?"})
            body = {k: v for k, v in rec.body.items() if k != "messages"}
            first = (len(rec.body["messages"]), _shape(body), _headings(rec.body))
            for k in kind:
                shapes.setdefault(k, {}).setdefault(model, set()).add(first)
    assert "?" not in shapes, "every judge request is about a sealed run"
    for model in ("scripted-judge-planted", "scripted-judge-balanced"):
        control, agent = shapes["control"][model], shapes["agent"][model]
        # Same request keys and tools, same case sections; and every turn shape a control's
        # judging takes, some agent's judging takes too.
        assert {s[1:] for s in control} == {s[1:] for s in agent}
        assert {s[0] for s in control} <= {s[0] for s in agent}


def test_each_control_seals_the_plan_it_plays_in_its_first_step(finished: Finished) -> None:
    """Issue #47: every control's first step seals the plan it plays (here its declared
    one: this campaign does not choose), as every agent's run's first step seals none; the
    fold labels each control by that plan (choosing: tests/runner/test_control_choice.py,
    tests/bench/test_blindness.py)."""
    state = finished.state
    plans = {(c.task_id, c.plan_sha256): c for c in state.controls.values()}
    controls = {c.run_id for c in state.controls.values()}
    for run_id, run in state.runs.items():
        if run_id in controls:
            assert run.chosen_plan and run.control_plan == run.chosen_plan, run_id
            assert (run.task_id, run.chosen_plan) in plans, "a plan of its own task"
        else:
            assert run.chosen_plan == "" and run.control_plan == "", "an agent's run chose none"
            assert run.step_count > 0
    labels = control_frame(finished.projections, ["controls"]).unique("run_id")
    by_run = dict(zip(labels["run_id"], labels["variant"], strict=True))
    for c in state.controls.values():
        assert by_run[c.run_id] == plans[(c.task_id, state.runs[c.run_id].control_plan)].kind
