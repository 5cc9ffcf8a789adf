"""`assay dlq`'s listing: dead letters read whole at 80 columns."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from assay_cli.commands._dlq import print_dead_letters

REASON = (
    "judge j1 gave up after 3 deliveries: the model's reply was not valid JSON (expected a "
    "verdict object with scores for every rubric dimension, got a prose apology instead) "
    "and the repair prompt failed twice in a row"
)


def test_dead_letters_at_80_columns_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    rows: list[dict[str, str | int]] = [
        {
            "sequence": n,
            "consumer": "judge-claude-sonnet-4-5-strict",
            "log_sequence": 1000 + n,
            "subject": f"assay.ev.ArtifactsSealed.campaign-long-name.run-{n:024d}",
            "deliveries": 3,
            "reason": REASON,
            "bytes": 10,
        }
        for n in (1, 2)
    ]
    buf = io.StringIO()
    print_dead_letters(rows, Console(file=buf, width=80))
    lines = buf.getvalue().splitlines()
    assert lines[0] == "2 dead letter(s)"
    for line in lines:
        assert len(line) <= 80 or " " not in line.strip(), line
    headings = [i for i, line in enumerate(lines) if line.startswith("  seq ")]
    assert [lines[i] for i in headings] == [
        "  seq 1 · consumer judge-claude-sonnet-4-5-strict",
        "  seq 2 · consumer judge-claude-sonnet-4-5-strict",
    ]
    for start, end in zip(headings, [*headings[1:], len(lines)], strict=True):
        block = lines[start + 1 : end]
        text = " ".join(line.strip() for line in block)
        assert f"reason: {REASON}" in text  # wrapped between words, never mid-word
        assert "subject: assay.ev.ArtifactsSealed.campaign-long-name.run-" in text
