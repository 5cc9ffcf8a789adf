"""Hostile task input is refused at submit, naming the task and the check."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.store import LocalBlobStore
from assay.tasks import load_tasks
from assay.tasks._draft import build_task
from assay_cli.run import load_drafts
from assay_cli.settings import CliSettings
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
        "kind": "number_near",
        "name": "total",
        "path": "a.md",
        "pattern": r"\d+",
        "expected": 1.0,
        "tolerance": 0.1,
    }
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
        match = r"task t1: attachments\[0\]: attachment .data/secret.txt.: folder .data. is a symbolic link"
    else:
        source, match = task, "task task: attachments: attachment 'data' is a symbolic link"
    with pytest.raises(TaskInputError, match=match):
        load_tasks(source, max_bytes=MAX)


def _task(root: Path) -> tuple[Path, Path]:
    """A good task folder `task` and a host file outside it."""
    root.mkdir(parents=True, exist_ok=True)
    secret = root / "secret.txt"
    secret.write_text("host secret")
    task = root / "task"
    (task / "data").mkdir(parents=True)
    (task / "prompt.md").write_text("hi")
    (task / "data" / "table.csv").write_text("a,b\n")
    return task, secret


def _replace(path: Path, link: Callable[[str, Path], None], target: Path) -> None:
    path.unlink(missing_ok=True)
    link(str(target), path)


# Every place a link can sit in a task folder, and the words that name it in the error.
LINKS: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "prompt.md to a file outside": (
        lambda t, s: _replace(t / "prompt.md", os.symlink, s),
        r"task task: prompt\.md is a symbolic link",
    ),
    "prompt.md dangling": (
        lambda t, s: _replace(t / "prompt.md", os.symlink, t / "gone"),
        r"task task: prompt\.md is a symbolic link",
    ),
    "task.yaml to a file outside": (
        lambda t, s: _replace(t / "task.yaml", os.symlink, s),
        r"task task: task\.yaml is a symbolic link",
    ),
    "prompt.md hard-linked to a file outside": (
        lambda t, s: _replace(t / "prompt.md", os.link, s),
        r"task task: prompt\.md is a hard link",
    ),
    "task.yaml hard-linked to a file outside": (
        lambda t, s: _replace(t / "task.yaml", os.link, s),
        r"task task: task\.yaml is a hard link",
    ),
    "attachment to a file outside": (
        lambda t, s: _replace(t / "data" / "table.csv", os.symlink, s),
        r"attachment 'data/table\.csv' is a symbolic link",
    ),
    "attachment hard-linked to a file outside": (
        lambda t, s: _replace(t / "data" / "table.csv", os.link, s),
        r"attachment 'data/table\.csv' is a hard link",
    ),
    "a link to a folder inside the task": (
        lambda t, s: os.symlink("data", t / "more"),
        r"attachment 'more' is a symbolic link",
    ),
    "a link to a folder outside": (
        lambda t, s: os.symlink(s.parent, t / "host"),
        r"attachment 'host' is a symbolic link",
    ),
}


@pytest.mark.parametrize("place", sorted(LINKS))
def test_a_link_anywhere_in_a_task_folder_is_refused(tmp_path: Path, place: str) -> None:
    task, secret = _task(tmp_path)
    make, match = LINKS[place]
    make(task, secret)
    with pytest.raises(TaskInputError, match=match):
        load_tasks(task, max_bytes=MAX)
    # The same folder inside a folder of tasks is refused alike.
    with pytest.raises(TaskInputError, match=match):
        load_tasks(tmp_path, max_bytes=MAX)


def test_a_linked_task_folder_in_a_folder_of_tasks_is_refused_not_skipped(tmp_path: Path) -> None:
    task, _ = _task(tmp_path / "elsewhere")
    (tmp_path / "tasks").mkdir()
    os.symlink(task, tmp_path / "tasks" / "linked")
    with pytest.raises(TaskInputError, match="linked is a symbolic link"):
        load_tasks(tmp_path / "tasks", max_bytes=MAX)
    _jsonl(tmp_path / "elsewhere", {"task_id": "j1", "prompt": "p"})
    os.symlink(tmp_path / "elsewhere" / "tasks.jsonl", tmp_path / "tasks" / "more.jsonl")
    (tmp_path / "tasks" / "linked").unlink()
    with pytest.raises(TaskInputError, match=r"more\.jsonl is a symbolic link"):
        load_tasks(tmp_path / "tasks", max_bytes=MAX)


def test_a_jsonl_attachment_under_an_inward_linked_folder_is_refused(tmp_path: Path) -> None:
    task, _ = _task(tmp_path)
    os.symlink("data", task / "alias")
    source = _jsonl(task, {"task_id": "t1", "prompt": "p", "attachments": ["alias/table.csv"]})
    with pytest.raises(
        TaskInputError, match=r"attachments\[0\]: .*folder 'alias' is a symbolic link"
    ):
        load_tasks(source, max_bytes=MAX)


def test_an_asi_task_json_linked_from_outside_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "theirs.json"
    outside.write_text(json.dumps({"task_id": "a1", "question": "q?"}))
    (tmp_path / "task").mkdir()
    os.symlink(outside, tmp_path / "task" / "task.json")
    with pytest.raises(TaskInputError, match=r"task\.json is a symbolic link"):
        load_tasks(tmp_path / "task", max_bytes=MAX)


def test_a_clean_task_folder_still_loads(tmp_path: Path) -> None:
    task, _ = _task(tmp_path)
    (task / "task.yaml").write_text("task_id: t1\n")
    [draft] = load_tasks(task, max_bytes=MAX)
    assert draft.fields["prompt"] == "hi"
    assert [a.path for a in draft.attachments] == ["data/table.csv"]


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
    assert CliSettings().max_tasks_per_submission >= 1
