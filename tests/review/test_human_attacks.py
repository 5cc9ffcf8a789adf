"""Attacks on human verdicts: each lands on the real log and every reader refuses it.

A human verdict counts only when an enrolled reviewer's key signed it under that
reviewer's own judge id, on a sealed run, scoring every rubric dimension once. Unsigned,
forged, another reviewer's, a foreign operator's, a judge's key passing itself off as a
human, a machine verdict under a reviewer's id: each is refused by the counting rule and counted.
Counted human verdicts never move a jury figure.
"""

from __future__ import annotations

from itertools import count
from pathlib import Path

import polars as pl
import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.security.signing import signer_for
from assay_report.review import rater_frames
from assay_schemas import ConfigError, DimensionScore, JudgmentRecorded
from assay_viewer.grading import publish_verdicts

from .conftest import Signed, enroll, foreign_reviewer, projections, verdict

_ids = count()


async def _raw(
    bus: Bus,
    event: JudgmentRecorded,
    signer: str | None,
    settings: Settings,
    *,
    data: bytes | None = None,
) -> int:
    subject = bus.subjects.of(event)
    body = data if data is not None else event.model_dump_json().encode()
    headers = {"Nats-Msg-Id": f"attack-{next(_ids)}"}  # stored whatever JetStream dedupes
    if signer is not None:
        key = signer_for(settings, signer)
        assert key is not None
        headers.update(key.headers(subject, body))
    return (await bus.js.publish(subject, body, headers=headers)).seq


async def test_only_the_enrolled_reviewers_own_signed_verdict_counts(
    bus: Bus, settings: Settings, signed: Signed, tmp_path: Path
) -> None:
    p = await projections(bus, settings)
    assert p.state.refused == {}
    jury_before = p.statistics_tables(["camp"])
    enroll(settings, "alice")
    enroll(settings, "bob")
    foreign_reviewer(settings, tmp_path, "mallory")
    run, other, third = signed.sealed[:3]
    attacks = {
        # unsigned
        await _raw(bus, verdict(p, "reviewer-alice", run, 9), None, settings): "unsigned",
        # bob's key writing alice's verdict
        await _raw(
            bus, verdict(p, "reviewer-alice", other, 9), "reviewer-bob", settings
        ): "reviewer bob wrote a verdict as reviewer-alice",
        # a key enrolled by another operator
        await _raw(
            bus, verdict(p, "reviewer-mallory", run, 2), "reviewer-mallory", settings
        ): "enrollment not signed by the operator",
        # a judge's key passing its output off as a human's
        await _raw(
            bus,
            verdict(p, "reviewer-alice", third, 1).model_copy(update={"judge_id": "judge_a"}),
            "judge-judge_a",
            settings,
        ): "judge/judge_a may not write a human verdict",
        # ... or as a reviewer's
        await _raw(
            bus, verdict(p, "reviewer-alice", third, 1), "judge-judge_a", settings
        ): "judge judge_a wrote a verdict as judge reviewer-alice",
        # a machine verdict under a reviewer's id, signed by that reviewer
        await _raw(
            bus,
            verdict(p, "reviewer-alice", third, 1).model_copy(update={"judge_kind": "machine"}),
            "reviewer-alice",
            settings,
        ): "may not write a machine verdict",
    }
    # the bytes altered after alice signed them
    good = verdict(p, "reviewer-alice", third, 3)
    subject = bus.subjects.of(good)
    body = good.model_dump_json().encode()
    key = signer_for(settings, "reviewer-alice")
    assert key is not None
    headers = {"Nats-Msg-Id": "altered", **key.headers(subject, body)}
    altered = body.replace(b'"score":3', b'"score":9')
    assert altered != body
    seq = (await bus.js.publish(subject, altered, headers=headers)).seq
    attacks[seq] = "bad signature by reviewer/alice"

    # The genuine one, through the same path the viewer and the import use.
    [counted] = await publish_verdicts(
        settings, "reviewer-alice", [verdict(p, "reviewer-alice", run, 7)]
    )
    # A second verdict of alice on the same run (another id, genuinely signed).
    second = verdict(p, "reviewer-alice", run, 1).model_copy(update={"event_id": "second"})
    attacks[await _raw(bus, second, "reviewer-alice", settings)] = "second human verdict"
    # Bob's verdict on a run that was never sealed.
    ghost = verdict(p, "reviewer-bob", run, 5).model_copy(update={"run_id": "nosuchrun"})
    attacks[await _raw(bus, ghost, "reviewer-bob", settings)] = "the run was never sealed"

    after = await projections(bus, settings)
    assert set(after.state.refused) == set(attacks)
    for seq, why in attacks.items():
        assert why in after.state.refused[seq].reason, (seq, after.state.refused[seq].reason)
    assert list(after.state.human_verdicts) == [f"{run}/reviewer-alice/0"]
    assert after.state.human_verdicts[f"{run}/reviewer-alice/0"].sequence == counted
    # A reference, never a juror: the jury's tables are those of before, to the row.
    jury_after = after.statistics_tables(["camp"])
    for name in ("ratings", "runs", "tags"):
        assert getattr(jury_after, name).equals(getattr(jury_before, name)), name
    assert "reviewer-alice" not in after.state.judges
    assert not any(k.endswith("reviewer-alice/0") for k in after.state.verdicts)
    frames = rater_frames(after, "camp")
    assert set(frames.humans["rater_id"].to_list()) == {"reviewer-alice"}
    assert frames.humans["score"].to_list() == [7.0] * frames.humans.height
    assert not frames.judges.filter(pl.col("rater_id").str.starts_with("reviewer-")).height


async def test_an_out_of_range_score_never_decodes_and_is_counted(
    bus: Bus, settings: Settings, signed: Signed
) -> None:
    p = await projections(bus, settings)
    enroll(settings, "alice")
    good = verdict(p, "reviewer-alice", signed.sealed[0], 7)
    data = good.model_dump_json().encode().replace(b'"score":7', b'"score":11', 1)
    seq = await _raw(bus, good, "reviewer-alice", settings, data=data)
    after = await projections(bus, settings)
    assert seq in after.state.refused and after.state.human_verdicts == {}
    with pytest.raises(ValueError):
        DimensionScore(score=11)


async def test_a_reviewer_without_an_enrolled_key_cannot_publish(
    bus: Bus, settings: Settings, signed: Signed
) -> None:
    p = await projections(bus, settings)
    with pytest.raises(ConfigError, match="assay keys enroll reviewer-nobody"):
        await publish_verdicts(
            settings, "reviewer-nobody", [verdict(p, "reviewer-nobody", signed.sealed[0], 5)]
        )
    assert not (settings.home / "keys" / "reviewer-nobody.seed").exists()
