"""Signed events: the trust list accepts exactly what an enrolled key may write."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.config import Settings
from assay.security.signing import (
    SIGNATURE,
    TrustList,
    ensure_operator,
    signer_for,
    trust_for,
)
from assay_schemas import (
    DimensionScore,
    Event,
    JudgmentRecorded,
    Producer,
    default_rubric,
)


def _settings(tmp_path: Path, name: str = "home") -> Settings:
    return Settings(home=tmp_path / name)


def _verdict(judge_id: str = "j1") -> JudgmentRecorded:
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


def _signed(settings: Settings, service: str, event: Event) -> tuple[str, bytes, dict[str, str]]:
    signer = signer_for(settings, service)
    assert signer is not None
    subject = f"assay.ev.{event.event_type}.{event.campaign_id}.{event.run_id or '-'}"
    data = event.model_dump_json().encode()
    return subject, data, signer.headers(subject, data)


@pytest.fixture
def home(tmp_path: Path) -> Settings:
    settings = _settings(tmp_path)
    ensure_operator(settings)
    return settings


def test_an_enrolled_judge_signs_its_own_verdicts(home: Settings) -> None:
    trust = trust_for(home)
    assert trust is not None
    verdict = trust.verify(*_signed(home, "judge-j1", _verdict("j1")), _verdict("j1"))
    assert verdict.ok and verdict.signer.startswith("judge/j1"), verdict


@pytest.mark.parametrize(
    ("service", "event", "reason"),
    [
        ("judge-j1", _verdict("j2"), "wrote a verdict as judge j2"),
        ("runner", _verdict("j1"), "runner/runner may not write JudgmentRecorded"),
        ("sandbox-manager", _verdict("rules"), "may not write JudgmentRecorded"),
        ("cli", _verdict("rules"), "may not write JudgmentRecorded"),
    ],
)
def test_a_key_writes_only_what_its_role_may(
    home: Settings, service: str, event: Event, reason: str
) -> None:
    trust = trust_for(home)
    assert trust is not None
    verdict = trust.verify(*_signed(home, service, event), event)
    assert not verdict.ok and reason in verdict.reason, verdict


def test_unsigned_altered_moved_or_foreign_events_are_refused(
    home: Settings, tmp_path: Path
) -> None:
    trust = trust_for(home)
    assert trust is not None
    event = _verdict()
    subject, data, headers = _signed(home, "judge-j1", event)
    assert trust.verify(subject, data, {}, event).reason == "unsigned"
    altered = data.replace(b'"score":7', b'"score":9')
    assert altered != data
    assert "bad signature" in trust.verify(subject, altered, headers, event).reason
    moved = subject.replace(".r1", ".r2")
    assert "bad signature" in trust.verify(moved, data, headers, event).reason
    forged = {**headers, SIGNATURE: headers[SIGNATURE][::-1]}
    assert not trust.verify(subject, data, forged, event).ok
    # A key enrolled by another operator does not count here.
    other = _settings(tmp_path, "elsewhere")
    ensure_operator(other)
    assert (
        trust.verify(*_signed(other, "judge-j1", event), event).reason
        == "enrollment not signed by the operator"
    )


def test_keys_are_private_and_stable(home: Settings) -> None:
    first = signer_for(home, "runner")
    again = signer_for(home, "runner")
    assert first is not None and again is not None
    assert first.public_key == again.public_key
    for path in (home.home / "keys").iterdir():
        if path.suffix in (".seed", ".enrollment"):
            assert path.stat().st_mode & 0o077 == 0, path


def test_without_an_operator_nothing_is_signed_or_checked(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert signer_for(settings, "runner") is None
    assert trust_for(settings) is None
    with pytest.raises(ValueError):
        TrustList("not-a-key")


def test_a_judge_on_another_machine_signs_with_a_key_enrolled_here(
    home: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`assay keys enroll judge-j9 --out DIR` where the operator seed is; DIR goes to the
    other machine's home, whose judge then signs verdicts the operator's trust list accepts."""
    from typer.testing import CliRunner

    from assay_cli import app

    monkeypatch.setenv("ASSAY_HOME", str(home.home))
    carried = tmp_path / "carried"
    result = CliRunner().invoke(app, ["keys", "enroll", "judge-j9", "--out", str(carried)])
    assert result.exit_code == 0, result.output
    elsewhere = _settings(tmp_path, "elsewhere")
    (elsewhere.home / "keys").mkdir(parents=True)
    for path in carried.iterdir():
        (elsewhere.home / "keys" / path.name).write_bytes(path.read_bytes())
    assert not (elsewhere.home / "keys" / "operator.seed").exists()
    trust = trust_for(home)
    assert trust is not None
    event = _verdict("j9")
    assert trust.verify(*_signed(elsewhere, "judge-j9", event), event).ok


def test_an_outside_publisher_signs_tasks_for_its_own_campaign_only(home: Settings) -> None:
    from assay_schemas import Task, TaskSubmitted

    trust = trust_for(home)
    assert trust is not None

    def task_for(campaign: str) -> TaskSubmitted:
        return TaskSubmitted(
            event_id=TaskSubmitted.id_for(campaign, "t1"),
            campaign_id=campaign,
            task_id="t1",
            task=Task(task_id="t1", prompt="p"),
            producer=Producer(service="node", version="0"),
        )

    mine = task_for("open")
    assert trust.verify(*_signed(home, "publisher-open", mine), mine).ok
    theirs = task_for("other")
    verdict = trust.verify(*_signed(home, "publisher-open", theirs), theirs)
    assert not verdict.ok and "publisher of open wrote to campaign other" in verdict.reason
    verdict = trust.verify(*_signed(home, "publisher-open", _verdict()), _verdict())
    assert not verdict.ok and "may not write JudgmentRecorded" in verdict.reason
