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
    Event,
    Producer,
)
from tests.security.signing import home, settings_in, signed_as, verdict_of

__all__ = ["home"]  # the fixture, used by the tests below


def test_an_enrolled_judge_signs_its_own_verdicts(home: Settings) -> None:
    trust = trust_for(home)
    assert trust is not None
    verdict = trust.verify(*signed_as(home, "judge-j1", verdict_of("j1")), verdict_of("j1"))
    assert verdict.ok and verdict.signer.startswith("judge/j1"), verdict


@pytest.mark.parametrize(
    ("service", "event", "reason"),
    [
        ("judge-j1", verdict_of("j2"), "wrote a verdict as judge j2"),
        ("runner", verdict_of("j1"), "runner/runner may not write JudgmentRecorded"),
        ("sandbox-manager", verdict_of("rules"), "may not write JudgmentRecorded"),
        ("cli", verdict_of("rules"), "may not write JudgmentRecorded"),
    ],
)
def test_a_key_writes_only_what_its_role_may(
    home: Settings, service: str, event: Event, reason: str
) -> None:
    trust = trust_for(home)
    assert trust is not None
    verdict = trust.verify(*signed_as(home, service, event), event)
    assert not verdict.ok and reason in verdict.reason, verdict


def test_unsigned_altered_moved_or_foreign_events_are_refused(
    home: Settings, tmp_path: Path
) -> None:
    trust = trust_for(home)
    assert trust is not None
    event = verdict_of()
    subject, data, headers = signed_as(home, "judge-j1", event)
    assert trust.verify(subject, data, {}, event).reason == "unsigned"
    altered = data.replace(b'"score":7', b'"score":9')
    assert altered != data
    assert "bad signature" in trust.verify(subject, altered, headers, event).reason
    moved = subject.replace(".r1", ".r2")
    assert "bad signature" in trust.verify(moved, data, headers, event).reason
    forged = {**headers, SIGNATURE: headers[SIGNATURE][::-1]}
    assert not trust.verify(subject, data, forged, event).ok
    # A key enrolled by another operator does not count here.
    other = settings_in(tmp_path, "elsewhere")
    ensure_operator(other)
    assert (
        trust.verify(*signed_as(other, "judge-j1", event), event).reason
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
    settings = settings_in(tmp_path)
    assert signer_for(settings, "runner") is None
    assert trust_for(settings) is None
    with pytest.raises(ValueError):
        TrustList("not-a-key")


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
    assert trust.verify(*signed_as(home, "publisher-open", mine), mine).ok
    theirs = task_for("other")
    verdict = trust.verify(*signed_as(home, "publisher-open", theirs), theirs)
    assert not verdict.ok and "publisher of open wrote to campaign other" in verdict.reason
    verdict = trust.verify(*signed_as(home, "publisher-open", verdict_of()), verdict_of())
    assert not verdict.ok and "may not write JudgmentRecorded" in verdict.reason
