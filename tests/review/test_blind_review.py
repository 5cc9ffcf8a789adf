"""Attacks on the review's blindness (issue #47), one per unblinding route.

- the queue order: a reviewer with the campaign file knows every run id (they derive from
  public names) and must not be able to predict which position holds which run;
- `/blob/<sha>`: a reviewer who rebuilds a control plan (or any file it names) and hashes
  it must not be able to ask the review viewer whether that blob exists;
- the page's files: only the graded run's own files, by its page token.
"""

from __future__ import annotations

import hashlib
import re
import stat
from functools import partial

import httpx
import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.security.signing import deployment_secret, ensure_operator, signer_for
from assay.store import LocalBlobStore
from assay_report.review import REVIEW_KEY, review_queue
from assay_report.state import VerdictRecord
from assay_schemas import ArtifactsSealed, ControlFile, ControlPlan
from assay_testing.synthetic_log import publish_events, synthetic_events

from .conftest import SPEC, Signed, projections


def _public_rank(reviewer: str, run_id: str) -> str:
    """The order an outsider computes from names alone (the old, unkeyed queue)."""
    return hashlib.sha256(f"assay-review\x1f{reviewer}\x1f{run_id}".encode()).hexdigest()


async def test_the_queue_order_cannot_be_predicted_from_public_names(
    bus: Bus, settings: Settings, signed: Signed
) -> None:
    p = await projections(bus, settings)
    queue = [i.run_id for i in review_queue(p, "camp", "reviewer-alice", key=b"k" * 32)]
    predicted = sorted(signed.sealed, key=lambda r: _public_rank("reviewer-alice", r))
    assert sorted(queue) == signed.sealed
    assert queue != predicted, "the outsider's order is the queue's"
    # Not even its first positions: a short session grades those.
    hits = sum(a == b for a, b in zip(queue, predicted, strict=True))
    assert hits < len(queue) // 2


async def test_knowing_one_runs_place_in_the_queue_tells_nothing_of_the_others(
    bus: Bus, settings: Settings, signed: Signed
) -> None:
    """A reviewer who learns that one queued run is a control (its work seen twice, say)
    must not learn which others are from their places. A queue that takes controls and
    agents' runs in turn puts a control two places on from each known one while both last."""
    p = await projections(bus, settings)
    controls = set(signed.sealed[::3])
    for run in controls:  # declared controls, as the fold marks them
        p.state.runs[run].control_plan = "c" * 64
    hits = guesses = 0
    for k in range(48):
        key = hashlib.sha256(f"deployment {k}".encode()).digest()
        queue = [i.run_id for i in review_queue(p, "camp", "reviewer-alice", key=key)]
        known = next(i for i, run in enumerate(queue) if run in controls)
        guessed = [run for i, run in enumerate(queue) if i != known and (i - known) % 2 == 0]
        hits += sum(run in controls for run in guessed)
        guesses += len(guessed)
    share = (len(controls) - 1) / (len(signed.sealed) - 1)
    assert hits / guesses < share + 0.15, (hits, guesses, share)


async def test_a_reviewer_is_never_given_the_same_work_twice(
    bus: Bus, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A control's epochs on a task leave the same files and answer each time, where a
    sampled model's runs differ: a reviewer shown that work twice (or after grading it
    once) would know it for a control. A queue holds one run of any work, agents' and
    controls' alike, and none whose work the reviewer graded already."""
    store = LocalBlobStore(settings.blob_dir)
    events = list(synthetic_events(SPEC, store=store))
    seals = [e for e in events if isinstance(e, ArtifactsSealed) and e.files]
    model, twins = seals[0], {e.run_id for e in seals[1:4]}
    events = [
        e.model_copy(update={"files": model.files, "final_message": model.final_message})
        if isinstance(e, ArtifactsSealed) and e.run_id in twins
        else e
        for e in events
    ]
    ensure_operator(settings)
    await publish_events(
        bus.js, bus.subjects, bus.stream.name, events, signers=partial(signer_for, settings)
    )
    p = await projections(bus, settings)
    alike = twins | {model.run_id}
    for k in range(8):
        key = hashlib.sha256(f"deployment {k}".encode()).digest()
        queue = [i.run_id for i in review_queue(p, "camp", "reviewer-alice", key=key)]
        assert len(alike & set(queue)) == 1, "the same work twice in one queue"
        assert len(queue) == len({e.run_id for e in events if isinstance(e, ArtifactsSealed)}) - 3
    # Graded once, that work is not queued again under any of its runs.
    shown = next(r for r in queue if r in alike)
    p.state.human_verdicts[f"{shown}/reviewer-alice/0"] = VerdictRecord(
        campaign_id="camp", run_id=shown, judge_id="reviewer-alice", sample=0, sequence=1
    )
    again = {i.run_id for i in review_queue(p, "camp", "reviewer-alice", key=key)}
    assert not again & alike


async def test_two_deployments_order_the_same_reviewers_queue_differently(
    bus: Bus, settings: Settings, signed: Signed, tmp_path_factory: pytest.TempPathFactory
) -> None:
    p = await projections(bus, settings)
    other = settings.model_copy(update={"home": tmp_path_factory.mktemp("other-deployment")})
    mine, theirs = deployment_secret(settings, REVIEW_KEY), deployment_secret(other, REVIEW_KEY)
    assert mine != theirs and len(mine) == 32
    a = [i.run_id for i in review_queue(p, "camp", "reviewer-alice", key=mine)]
    b = [i.run_id for i in review_queue(p, "camp", "reviewer-alice", key=theirs)]
    assert sorted(a) == sorted(b) and a != b
    # Created once: the same deployment keeps its order on every load, by any process.
    assert deployment_secret(settings, REVIEW_KEY) == mine
    assert a == [i.run_id for i in review_queue(p, "camp", "reviewer-alice", key=mine)]
    path = settings.home / "keys" / f"{REVIEW_KEY}.secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_the_review_viewer_answers_no_blob_by_its_hash(
    settings: Settings, signed: Signed, review: httpx.AsyncClient
) -> None:
    # A control plan as a reviewer could rebuild it from a grading page, and a file that
    # does exist in the store: neither answers, so no hash tells anything.
    sealed = next(e for e in signed.events if isinstance(e, ArtifactsSealed) and e.files)
    ref = sealed.files[0]
    plan = ControlPlan(
        files=[ControlFile(path=ref.path, sha256=ref.sha256, size=ref.size, text=True)],
        message=sealed.final_message,
    )
    planned = signed.store.put_bytes(plan.model_dump_json().encode()).sha256
    for sha in (planned, ref.sha256, "0" * 64):
        got = await review.get(f"/blob/{sha}")
        assert got.status_code == 404, sha
        assert (await review.get(f"/blob/{sha}?name=x.png")).status_code == 404


async def test_a_page_serves_only_its_own_runs_files_by_its_token(
    settings: Settings, signed: Signed, review: httpx.AsyncClient
) -> None:
    queue = await review.get("/review/camp")
    tokens = re.findall(r'href="/review/camp/run/([0-9a-f]{32})"', queue.text)
    assert len(tokens) >= 2
    page = await review.get(f"/review/camp/run/{tokens[0]}")
    assert "/blob/" not in page.text
    link = re.search(r'href="(/review/camp/run/[0-9a-f]{32}/file\?path=[^"]+)"', page.text)
    assert link is not None
    shown = await review.get(link.group(1).replace("&amp;", "&"))
    assert shown.status_code == 200 and "/blob/" not in shown.text
    raw = re.search(r'href="(/review/camp/run/[0-9a-f]{32}/raw\?path=[^"]+)"', shown.text)
    assert raw is not None, "the download goes by the page's token"
    got = await review.get(raw.group(1).replace("&amp;", "&"))
    assert got.status_code == 200 and got.content
    # Another run's token with this run's path, a made-up token, a path it never sealed.
    path = raw.group(1).split("path=", 1)[1].replace("&amp;", "&")
    other = await review.get(f"/review/camp/run/{'f' * 32}/raw?path={path}")
    assert other.status_code == 404
    absent = await review.get(f"/review/camp/run/{tokens[0]}/raw?path=not/sealed.txt")
    assert absent.status_code == 404
