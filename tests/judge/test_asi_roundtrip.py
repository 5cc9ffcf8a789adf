"""ASI-Bench tasks round-trip: every field of both judge variants acts where it should."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.store import LocalBlobStore
from assay.tasks import load_tasks
from assay_aggregator import fold
from assay_judge.files import SealedFiles
from assay_judge.llm.prompts import case_prompt
from assay_report import Projections
from assay_schemas import Task, default_rubric

from .cases import Judging, judgments, reading_judge, verdict

pytestmark = pytest.mark.timeout(60)

IC50_NEAR_3_2 = {
    "kind": "number_near",
    "path": "*.txt",
    "pattern": "IC50[^0-9]*([0-9.]+)",
    "expected": 3.2,
    "tolerance": 0.5,
}
"""An ASI-Bench rule's check: the IC50 a text file states is 3.2 ± 0.5."""
HYBRID = {
    "task_id": "asi-hybrid",
    "background": "We measured a dose-response curve.",
    "question": "Estimate the IC50.",
    "resources": ["dose.csv"],
    "expected_output": {"ic50": "a number in uM", "figures": ["curve.png"]},
    "notes": "Gold: IC50 is about 3.2 uM.",
    "notes_to_judges": True,
    "judge": {
        "method": "hybrid",
        "rules": [
            {
                "name": "ic50",
                "weight": 3.0,
                "check": IC50_NEAR_3_2,
            },
            {"name": "curve", "weight": 0.5, "description": "Shows the fitted curve."},
        ],
        "llm": {
            "model": "gpt-4o",
            "dimensions": ["Curve fit quality", "scientific_accuracy"],
            "sampling_times": 3,
        },
    },
}
RULE_AND_LLM = {
    "task_id": "asi-rl",
    "background": "Two strains were grown.",
    "question": "Which grows faster?",
    "resources": [{"path": "dose.csv"}],
    "notes": "Gold: strain B.",
    "judge": {
        "method": "rule_and_llm",
        "rules": ["Names the faster strain", "Reports an effect size"],
        "llm_system_prompt": "Be harsh on missing effect sizes (marker-7f3a).",
        "llm": {"dimensions": [{"name": "Effect size", "description": "Size reported."}]},
    },
}


def _write(folder: Path, name: str, spec: dict[str, Any]) -> None:
    (folder / "data").mkdir(exist_ok=True)
    (folder / "data" / "dose.csv").write_text("conc,resp\n1,0.9\n")
    (folder / name).write_text(json.dumps(spec))


def _load(tmp_path: Path, store: LocalBlobStore) -> dict[str, Task]:
    _write(tmp_path, "hybrid.json", HYBRID)
    _write(tmp_path, "rl.json", RULE_AND_LLM)
    return {d.task_id: d.to_task(store) for d in load_tasks(tmp_path, max_bytes=1 << 20)}


def _scores(task: Task, score: int) -> dict[str, Any]:
    assert task.judge.rubric is not None
    keys = task.judge.rubric.dimension_keys
    return {k: {"score": score, "reason": f"{k} ok"} for k in keys}


async def test_both_variants_round_trip(judging: Judging, tmp_path: Path) -> None:
    tasks = _load(tmp_path, judging.store)
    hybrid, rl = tasks["asi-hybrid"], tasks["asi-rl"]
    # One script serves both tasks: the verdict names whichever rubric the request shows.
    model = judging.scripted(
        lambda request: reading_judge(
            [],
            verdict(
                7,
                scores=_scores(hybrid if "asi-hybrid" in str(request.messages) else rl, 7),
            ),
        )(request),
    )
    spec = judging.spec("j1", model)
    await judging.campaign([spec], "asi")
    async with judging.running(judging.llm(spec), judging.rules()):
        for run_id, task in (("r-hybrid", hybrid), ("r-rl", rl)):
            await judging.seal(
                run_id,
                campaign_id="asi",
                files={"ic50.txt": b"IC50 = 3.1 uM\n"},
                final_message="IC50 is 3.1 uM (ic50.txt).",
                task=task,
            )
        events = await judging.wait(lambda evs: len(judgments(evs)) >= 6)
    llm = {r: [j for j in judgments(events, "j1") if j.run_id == r] for r in ("r-hybrid", "r-rl")}
    # Sampling count: judge.llm.sampling_times of the hybrid task; 1 for the other.
    assert sorted(j.sample for j in llm["r-hybrid"]) == [0, 1, 2]
    assert len(llm["r-rl"]) == 1
    # Custom dimensions are the rubric the verdicts score.
    assert {tuple(j.scores) for j in llm["r-hybrid"]} == {
        ("curve_fit_quality", "scientific_accuracy")
    }
    assert list(llm["r-rl"][0].scores) == ["effect_size"]
    assert llm["r-rl"][0].rubric_id == "task-asi-rl"
    # Rule weights weigh: the runnable rule is a weighted reference check.
    [rules] = [j for j in judgments(events, "rules") if j.run_id == "r-hybrid"]
    ic50 = next(c for c in rules.checks if c.name == "ic50")
    assert ic50.passed and ic50.weight == 3.0
    # What the judges were told, as the model server received it.
    sent = {
        r: json.dumps(req.body)
        for req in judging.server.requests(model)
        for r in [_task_of(req.body)]
    }
    assert "marker-7f3a" in sent["asi-rl"] and "marker-7f3a" not in sent["asi-hybrid"]
    assert "(weight 1) Reports an effect size" in sent["asi-rl"]
    assert "(weight 0.5) Shows the fitted curve." in sent["asi-hybrid"]
    assert "ic50: a number in uM" in sent["asi-hybrid"] and "- curve.png" in sent["asi-hybrid"]
    assert "Gold: IC50" in sent["asi-hybrid"] and "Gold: strain B" not in sent["asi-rl"]
    assert "Curve fit quality" in sent["asi-hybrid"]
    # The aggregator accepts the task's own dimensions and its report shows them.
    state = fold(enumerate(events, 1))
    assert not state.refused
    dims = set(Projections(state).table("judgments")["dimension"].to_list())
    assert {"curve_fit_quality", "effect_size"} <= dims


def _task_of(body: dict[str, Any]) -> str:
    text = json.dumps(body)
    return "asi-hybrid" if "task asi-hybrid" in text else "asi-rl"


@pytest.mark.parametrize("to_judges", [True, False])
def test_notes_reach_the_judges_only_when_the_task_says_so(to_judges: bool, tmp_path: Path) -> None:
    task = Task(task_id="t", prompt="p", notes="gold hypothesis: X", notes_to_judges=to_judges)
    files = SealedFiles(files=[], store=LocalBlobStore(tmp_path), attachments=set())
    prompt = case_prompt(task, "done", files, default_rubric())
    assert ("gold hypothesis: X" in prompt) is to_judges
