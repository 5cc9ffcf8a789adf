"""Hostile task input is refused at submit, naming the task and the check."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.run import load_drafts
from assay.store import LocalBlobStore
from assay.tasks import load_tasks
from assay.tasks._draft import build_task
from assay_schemas import AgentSpec, CampaignSpec, TaskInputError

MAX = 1_000_000


def _fields(check: dict[str, object]) -> dict[str, object]:
    return {"task_id": "t9", "prompt": "p", "reference_checks": [check]}


def test_an_unclosed_pattern_fails_the_submit() -> None:
    check = {"kind": "contains", "name": "mentions", "path": "a.md", "pattern": "(unclosed"}
    with pytest.raises(
        TaskInputError, match=r"task t9: reference_checks\[0\] \('mentions'\).*missing \)"
    ):
        build_task(_fields(check), [])


def test_a_backreference_fails_the_submit_because_re2_cannot_run_it() -> None:
    # What passes submit is what the judge's linear-time engine can run.
    check = {"kind": "contains", "name": "twice", "path": "a.md", "pattern": r"(a)\1"}
    with pytest.raises(TaskInputError, match=r"'twice'.*not a valid RE2 regex"):
        build_task(_fields(check), [])


def test_a_catastrophic_pattern_is_accepted_and_runs_in_linear_time() -> None:
    check = {"kind": "contains", "name": "as", "path": "a.md", "pattern": "(a+)+$"}
    assert build_task(_fields(check), []).reference_checks[0].name == "as"


def test_a_number_pattern_without_a_group_fails_the_submit() -> None:
    check = {
        "kind": "number_near", "name": "total", "path": "a.md", "pattern": r"\d+",
        "expected": 1.0, "tolerance": 0.1,
    }  # fmt: skip
    with pytest.raises(TaskInputError, match=r"'total'.*needs a group"):
        build_task(_fields(check), [])


def test_valid_patterns_pass() -> None:
    check = {"kind": "contains", "name": "ok", "path": "a.md", "pattern": "(closed)"}
    assert build_task(_fields(check), []).reference_checks[0].name == "ok"


def _jsonl(folder: Path, *records: dict[str, object]) -> Path:
    path = folder / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("form", ["jsonl", "folder"])
def test_a_symlinked_parent_directory_is_refused(tmp_path: Path, form: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret")
    task = tmp_path / "task"
    task.mkdir()
    (task / "prompt.md").write_text("hi")
    os.symlink("../outside", task / "data")
    if form == "jsonl":
        source = _jsonl(task, {"task_id": "t1", "prompt": "p", "attachments": ["data/secret.txt"]})
        match = r"task t1: attachments\[0\]: attachment 'data/secret.txt' resolves outside"
    else:
        source, match = task, "task task: attachments: attachment 'data' is a symbolic link"
    with pytest.raises(TaskInputError, match=match):
        load_tasks(source, max_bytes=MAX)


def test_a_prompt_of_the_wrong_type_names_task_and_field(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "task.yaml").write_text("prompt: 12345\n")
    with pytest.raises(TaskInputError, match="task t: prompt: expected text, got int 12345"):
        load_tasks(tmp_path / "t", max_bytes=MAX)
    path = _jsonl(tmp_path, {"task_id": "j1", "prompt": 12345})
    with pytest.raises(TaskInputError, match="task j1: prompt"):
        build_task(load_tasks(path, max_bytes=MAX)[0].fields, [])


async def test_a_batch_with_an_oversized_task_publishes_nothing(bus: Bus, tmp_path: Path) -> None:
    for name, prompt in (("fine", "hello"), ("huge", "x" * 10_000_000)):
        (tmp_path / "tasks" / name).mkdir(parents=True)
        (tmp_path / "tasks" / name / "prompt.md").write_text(prompt)
    drafts = load_tasks(tmp_path / "tasks", max_bytes=MAX)
    campaign = CampaignSpec(campaign_id="c1", agents=[AgentSpec(agent_id="a", model="m")])
    store = LocalBlobStore(tmp_path / "blobs")
    with pytest.raises(TaskInputError, match=r"task huge: .* over the 1048576 byte limit \(prompt"):
        await submit_campaign(bus, store, campaign, drafts)
    assert [e async for e in bus.replay()] == []


def test_the_number_of_tasks_per_submission_is_capped(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, *({"task_id": f"t{i}", "prompt": "p"} for i in range(30)))
    assert len(load_drafts([path], MAX, max_tasks=30)) == 30
    with pytest.raises(TaskInputError, match="more than 20 tasks in one submission"):
        load_drafts([path], MAX, max_tasks=20)
    assert Settings().max_tasks_per_submission >= 1
