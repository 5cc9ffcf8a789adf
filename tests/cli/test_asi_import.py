"""ASI-Bench import says what it does with each field: the agent is shown the expected
output unless the task keeps it for the judges, and a field Assay does not honour is
named in a warning at submit, never dropped in silence."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from assay.config import Settings
from assay.store import LocalBlobStore
from assay.tasks import load_asi_task
from tests.backbone.test_cli import run_cli

MAX = 1_000_000

SPEC: dict[str, Any] = {
    "task_id": "asi-1",
    "background": "We ran a dose-response assay.",
    "question": "What is the IC50?",
    "expected_output": {"ic50": "a number in uM", "figures": ["curve.png"]},
    "judge": {
        "method": "hybrid",
        "rules": ["Reports the IC50"],
        "llm": {"model": "gpt-4o", "dimensions": ["scientific_accuracy"], "temperature": 0},
        "rubric_url": "https://example.org/rubric",
    },
    "author": "someone",
}


def _write(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / "asi.json"
    path.write_text(json.dumps(spec))
    return path


def test_the_agent_is_shown_the_expected_output(tmp_path: Path) -> None:
    task = load_asi_task(_write(tmp_path, SPEC), max_bytes=MAX).to_task(
        LocalBlobStore(tmp_path / "blobs")
    )
    assert task.prompt.startswith("We ran a dose-response assay.\n\nWhat is the IC50?")
    assert "# Expected output\nic50: a number in uM\nfigures:\n  - curve.png" in task.prompt
    assert task.expected_output.startswith("ic50: a number in uM")  # the judges see it too


def test_a_task_may_keep_the_expected_output_for_the_judges(tmp_path: Path) -> None:
    spec = {**SPEC, "expected_output_judges_only": True}
    task = load_asi_task(_write(tmp_path, spec), max_bytes=MAX).to_task(
        LocalBlobStore(tmp_path / "blobs")
    )
    assert "ic50" not in task.prompt and "Expected output" not in task.prompt
    assert task.expected_output.startswith("ic50: a number in uM")


def test_each_field_not_honoured_is_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        draft = load_asi_task(_write(tmp_path, SPEC), max_bytes=MAX)
    text = "\n".join(draft.warnings)
    assert "task asi-1: judge.method 'hybrid' is not honoured" in text
    assert "task asi-1: judge.llm.model 'gpt-4o' is not honoured" in text
    assert (
        "task asi-1: fields not honoured (ignored): author, judge.llm.temperature, judge.rubric_url"
        in text
    )
    assert caplog.records == [], "said by the CLI as warnings, never logged (issue #53 item 5)"
    honoured = {k: v for k, v in SPEC.items() if k != "author"}
    honoured["judge"] = {"rules": ["Reports the IC50"], "llm": {"dimensions": ["novelty"]}}
    assert load_asi_task(_write(tmp_path, honoured), max_bytes=MAX).warnings == ()


def test_submit_prints_the_warnings(settings: Settings, tmp_path: Path) -> None:
    _write(tmp_path, SPEC)
    campaign = tmp_path / "c.yaml"
    campaign.write_text("campaign_id: c\nagents: [{agent_id: a, model: m}]\n")
    out = run_cli(["submit", str(tmp_path / "asi.json"), "-c", str(campaign)], settings, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "judge.method 'hybrid' is not honoured" in out.stderr
    assert "judge.llm.model 'gpt-4o' is not honoured" in out.stderr


def test_the_cli_says_what_is_not_honoured_as_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue #53 item 5: each once, as a warning on standard error, not a log line."""
    from assay_cli.run import load_drafts

    [draft] = load_drafts([_write(tmp_path, SPEC)], MAX)
    said = capsys.readouterr().err.splitlines()
    assert said == [f"warning: {w}" for w in draft.warnings]
