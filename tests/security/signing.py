"""Signing helpers shared by the trust-list tests and the CLI's `assay keys` tests: a home
with an operator, a judge's verdict, and an event signed as an enrolled service."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.config import Settings
from assay.security.signing import ensure_operator, signer_for
from assay_schemas import Event, JudgmentRecorded, Producer
from assay_testing.events import judgment_recorded, run_requested

JUDGE = Producer(service="judge", version="0")


def settings_in(tmp_path: Path, name: str = "home") -> Settings:
    """Settings whose home is a folder `name` under `tmp_path`."""
    return Settings(home=tmp_path / name)


def verdict_of(judge_id: str = "j1") -> JudgmentRecorded:
    """A whole verdict of judge `judge_id` on sample 0 of run r1."""
    return judgment_recorded(run_requested(), judge_id, 7, producer=JUDGE)


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
