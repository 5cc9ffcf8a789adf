"""Signing helpers shared by the trust-list tests and the CLI's `assay keys` tests: a home
with an operator, a judge's verdict, and an event signed as an enrolled service."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.config import Settings
from assay.security.signing import ensure_operator, signer_for
from assay_schemas import DimensionScore, Event, JudgmentRecorded, Producer, default_rubric


def settings_in(tmp_path: Path, name: str = "home") -> Settings:
    """Settings whose home is a folder `name` under `tmp_path`."""
    return Settings(home=tmp_path / name)


def verdict_of(judge_id: str = "j1") -> JudgmentRecorded:
    """A whole verdict of judge `judge_id` on sample 0 of run r1."""
    scores = {d: DimensionScore(score=7) for d in default_rubric().dimension_keys}
    return JudgmentRecorded(
        event_id=JudgmentRecorded.id_for("r1", judge_id, 0),
        campaign_id="c1",
        run_id="r1",
        task_id="t1",
        judge_id=judge_id,
        judge_family="f",
        judge_model="m",
        sample=0,
        rubric_id="assay-default",
        rubric_version=1,
        scores=scores,
        producer=Producer(service="judge", version="0"),
    )


def signed_as(settings: Settings, service: str, event: Event) -> tuple[str, bytes, dict[str, str]]:
    """The subject, bytes and signature headers of `event` signed as `service`."""
    signer = signer_for(settings, service)
    assert signer is not None
    subject = f"assay.ev.{event.event_type}.{event.campaign_id}.{event.run_id or '-'}"
    data = event.model_dump_json().encode()
    return subject, data, signer.headers(subject, data)


@pytest.fixture
def home(tmp_path: Path) -> Settings:
    """A home holding the operator seed, so that enrolled keys sign and are trusted."""
    settings = settings_in(tmp_path)
    ensure_operator(settings)
    return settings
