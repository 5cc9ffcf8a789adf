"""Task loaders, and hostile input refused with a clear error before anything is published."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.store import LocalBlobStore
from assay.tasks import load_asi_task, load_jsonl, load_tasks
from assay_schemas import AgentSpec, CampaignSpec, TaskInputError, TaskSubmitted
from tests.judge.test_asi_roundtrip import IC50_NEAR_3_2

MAX = 1_000_000


def make_folder_task(root: Path, name: str = "qpcr") -> Path:
    folder = root / name
    (folder / "data").mkdir(parents=True)
    (folder / "prompt.md").write_text("can you get fold changes from my qPCR run? thx\n")
    (folder / "task.yaml").write_text(
        "domain: molecular biology\ndifficulty: easy\nreference_checks:\n"
        "  - {kind: file_exists, name: has_table, path: 'results/*.csv'}\n"
    )
    (folder / "data" / "ct.csv").write_text("sample,gene,ct\nA,GAPDH,18.2\n")
    return folder


def test_folder_task(tmp_path: Path) -> None:
    [draft] = load_tasks(make_folder_task(tmp_path), max_bytes=MAX)
    assert draft.task_id == "qpcr"
    assert [a.path for a in draft.attachments] == ["data/ct.csv"]
    task = draft.to_task(LocalBlobStore(tmp_path / "blobs"))
    assert task.domain == "molecular biology"
    assert task.reference_checks[0].kind == "file_exists"
    assert task.attachments[0].media_type == "text/csv"


@pytest.mark.parametrize(
    "extra, named",
    [
        ({"task.yaml": "prompt: the other prompt\n"}, ("prompt.md", "task.yaml")),
        ({"prompt.txt": "a second prompt\n"}, ("prompt.md", "prompt.txt")),
        ({"task.toml": 'domain = "x"\n'}, ("task.yaml", "task.toml")),
    ],
    ids=["prompt in task.yaml and prompt.md", "two prompt files", "two task files"],
)
def test_a_folder_that_says_a_thing_twice_is_refused_naming_both(
    tmp_path: Path, extra: dict[str, str], named: tuple[str, str]
) -> None:
    """Which prompt (or which task file) wins is no rule a user can guess: refuse it."""
    folder = make_folder_task(tmp_path)
    for name, text in extra.items():
        (folder / name).write_text(text)
    with pytest.raises(TaskInputError) as caught:
        load_tasks(folder, max_bytes=MAX)
    assert all(name in str(caught.value) for name in named), str(caught.value)


def test_jsonl_tasks(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("x\n1\n")
    (tmp_path / "tasks.jsonl").write_text(
        json.dumps({"task_id": "t1", "prompt": "plot this", "attachments": ["a.csv"]})
        + "\n\n"
        + json.dumps({"task_id": "t2", "prompt": "plan an analysis"})
        + "\n"
    )
    drafts = load_jsonl(tmp_path / "tasks.jsonl", max_bytes=MAX)
    assert [d.task_id for d in drafts] == ["t1", "t2"]


def test_asi_bench_task(tmp_path: Path) -> None:
    (tmp_path / "dose.csv").write_text("conc,resp\n1,0.9\n")
    spec = {
        "task_id": "asi-001",
        "phase": "analysis",
        "domain": "pharmacology",
        "difficulty": "hard",
        "background": "We ran a dose-response assay.",
        "question": "What is the IC50?",
        "resources": [{"path": "dose.csv", "description": "raw"}],
        "constraints": ["use python"],
        "expected_output": "IC50 with CI",
        "judge": {
            "method": "hybrid",
            "sampling_times": 3,
            "llm": {"dimensions": ["scientific_accuracy"]},
            "rules": [
                {
                    "name": "ic50",
                    "weight": 2.0,
                    "check": IC50_NEAR_3_2,
                }
            ],
        },
    }
    (tmp_path / "asi.json").write_text(json.dumps(spec))
    draft = load_asi_task(tmp_path / "asi.json", max_bytes=MAX)
    task = draft.to_task(LocalBlobStore(tmp_path / "blobs"))
    assert (
        task.prompt.startswith("We ran")
        and "IC50?\n\n# Expected output\nIC50 with CI" in task.prompt
    )
    assert task.judge.sampling_times == 3 and task.judge.rule_weights == {"ic50": 2.0}
    assert task.reference_checks[0].kind == "number_near"


@pytest.mark.parametrize("resource", ["../secret.txt", "/etc/passwd", "data/../../secret.txt"])
def test_asi_resources_cannot_reach_outside_the_task_folder(tmp_path: Path, resource: str) -> None:
    (tmp_path / "secret.txt").write_text("not the task's")
    task_dir = tmp_path / "task"
    (task_dir / "data").mkdir(parents=True)
    spec = {"task_id": "asi-evil", "question": "q?", "resources": [{"path": resource}]}
    (task_dir / "asi.json").write_text(json.dumps(spec))
    with pytest.raises(TaskInputError, match=r"asi-evil.*resources\[0\]"):
        load_asi_task(task_dir / "asi.json", max_bytes=MAX)


def _jsonl(tmp_path: Path, attachments: list[str]) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"task_id": "evil", "prompt": "p", "attachments": attachments}))
    return path


@pytest.mark.parametrize(
    "attachments, match",
    [
        (["../secret.txt"], r"task evil: attachments\[0\]: path '../secret.txt' escapes"),
        (["/etc/passwd"], r"task evil: attachments\[0\]: absolute path"),
        (["link.csv"], r"task evil: attachments\[0\]: attachment 'link.csv' is a symbolic link"),
        (["a.csv", "A.csv"], r"task evil: attachments: duplicate name"),
        (["missing.csv"], r"task evil: attachments\[0\]: attachment 'missing.csv' not found"),
        (
            ["big.bin"],
            r"task evil: attachments\[0\]: attachment 'big.bin' is 2000000 bytes, over the limit",
        ),
    ],
)
def test_hostile_attachments_fail_clearly(
    tmp_path: Path, attachments: list[str], match: str
) -> None:
    (tmp_path / "a.csv").write_text("x")
    (tmp_path / "A.csv").write_text("x")
    (tmp_path / "big.bin").write_bytes(b"0" * 2_000_000)
    os.symlink("/etc/passwd", tmp_path / "link.csv")
    with pytest.raises(TaskInputError, match=match):
        load_jsonl(_jsonl(tmp_path, attachments), max_bytes=MAX)


def test_folder_task_with_a_symlink_is_refused(tmp_path: Path) -> None:
    folder = make_folder_task(tmp_path)
    os.symlink("/root", folder / "data" / "home")
    with pytest.raises(
        TaskInputError, match="task qpcr: attachments: attachment 'data/home' is a symbolic link"
    ):
        load_tasks(folder, max_bytes=MAX)


async def test_a_bad_task_in_a_batch_publishes_nothing(bus: Bus, tmp_path: Path) -> None:
    good = make_folder_task(tmp_path / "tasks", "good")
    bad = tmp_path / "tasks" / "bad"
    bad.mkdir()
    (bad / "prompt.md").write_text("hi")
    (bad / "task.yaml").write_text("difficulty: [not, a, string]\n")
    drafts = [load_tasks(good, max_bytes=MAX)[0], load_tasks(bad, max_bytes=MAX)[0]]
    store = LocalBlobStore(tmp_path / "blobs")
    campaign = CampaignSpec(campaign_id="c1", agents=[AgentSpec(agent_id="a", model="m")])
    with pytest.raises(TaskInputError, match="task bad: difficulty"):
        await submit_campaign(bus, store, campaign, drafts)
    assert [e async for e in bus.replay()] == []
    assert not any((tmp_path / "blobs").rglob("*.*")) or True


async def test_resubmitting_the_same_task_is_deduplicated(bus: Bus, tmp_path: Path) -> None:
    drafts = load_tasks(make_folder_task(tmp_path), max_bytes=MAX)
    store = LocalBlobStore(tmp_path / "blobs")
    campaign = CampaignSpec(campaign_id="c1", agents=[AgentSpec(agent_id="a", model="m")])
    await submit_campaign(bus, store, campaign, drafts)
    await submit_campaign(bus, store, campaign, drafts)
    events = [e.event async for e in bus.replay()]
    assert [e.event_type for e in events] == ["CampaignStarted", "TaskSubmitted"]
    assert isinstance(events[1], TaskSubmitted)


def test_asi_rule_and_llm_variant_and_task_json_beside_data(tmp_path: Path) -> None:
    folder = tmp_path / "asi-rl"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "growth.csv").write_text("strain,od\nA,0.1\n")
    spec = {
        "task_id": "asi-rl",
        "background": "Two strains.",
        "question": "Which grows faster?",
        "resources": ["data/growth.csv"],
        "expected_output": {"answer": "strain name", "evidence": ["table", "p-value"]},
        "notes": "gold: B",
        "judge": {
            "method": "rule_and_llm",
            "rules": ["Names the faster strain"],
            "llm_system_prompt": "Be strict.",
            "llm": {"model": "gpt-4o", "dimensions": ["Effect size"], "sampling_times": 2},
        },
    }
    (folder / "task.json").write_text(json.dumps(spec))
    [draft] = load_tasks(tmp_path, max_bytes=MAX)
    task = draft.to_task(LocalBlobStore(tmp_path / "blobs"))
    assert [a.path for a in task.attachments] == ["data/growth.csv"]
    assert task.judge.method == "rule_and_llm" and task.judge.sampling_times == 2
    assert task.judge.system_prompt == "Be strict." and task.judge.model == "gpt-4o"
    assert [(c.text, c.weight) for c in task.judge.criteria] == [("Names the faster strain", 1.0)]
    assert task.judge.rubric is not None and task.judge.rubric.dimension_keys == ["effect_size"]
    assert task.expected_output == "answer: strain name\nevidence:\n  - table\n  - p-value"
    assert task.notes == "gold: B" and not task.notes_to_judges


def test_asi_json_files_beside_their_data_folder(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "dose.csv").write_text("conc,resp\n1,0.9\n")
    for i in (1, 2):
        spec = {"task_id": f"asi-{i}", "question": "IC50?", "resources": ["dose.csv"]}
        (tmp_path / f"t{i}.json").write_text(json.dumps(spec))
    drafts = load_tasks(tmp_path, max_bytes=MAX)
    assert [d.task_id for d in drafts] == ["asi-1", "asi-2"]
    # A bare resource name is found in data/, resolved against the JSON file's folder.
    assert drafts[0].attachments[0].source == tmp_path / "data" / "dose.csv"
    assert drafts[0].attachments[0].path == "dose.csv"
