"""`assay view --review` in-process: a blind queue, a grading page, a form that only its
own page can submit (CSRF, origin, size, type, range), and the validity table's data."""

from __future__ import annotations

import re

import httpx
import pytest

from assay.bus import Bus
from assay.config import Settings
from assay_report.review import review_queue
from assay_schemas import ConfigError
from assay_viewer.asgi import MAX_FORM_BYTES
from assay_viewer.review import ReviewDesk

from .conftest import SPEC, Signed, projections, rubric_scores

KEY = b"a deployment secret of 32 bytes!"


def _secrets(signed: Signed) -> set[str]:
    """What a blind page must never show: agents, judges, run ids."""
    agents = {f"agent_{i}" for i in range(SPEC.n_agents)}
    return agents | {"judge_a", "judge_b", "rules"} | set(signed.sealed)


async def _first(review: httpx.AsyncClient) -> str:
    page = await review.get(f"/review/{SPEC.campaign_id}")
    assert page.status_code == 200
    links = re.findall(r'href="(/review/camp/run/[0-9a-f]{32})"', page.text)
    assert links
    return str(links[0])


def test_a_reviewer_without_an_enrolled_key_cannot_open_a_desk(settings: Settings) -> None:
    with pytest.raises(ConfigError, match="assay keys enroll reviewer-nobody"):
        ReviewDesk(settings, "nobody")


async def test_the_queue_is_blind_and_seeded_per_reviewer(
    bus: Bus, settings: Settings, signed: Signed, review: httpx.AsyncClient
) -> None:
    page = await review.get("/review/camp")
    assert page.status_code == 200
    assert len(re.findall(r'class="grade"', page.text)) == len(signed.sealed)
    for secret in _secrets(signed):
        assert secret not in page.text, secret
    p = await projections(bus, settings)
    alice = [i.run_id for i in review_queue(p, "camp", "reviewer-alice", key=KEY)]
    bob = [i.run_id for i in review_queue(p, "camp", "reviewer-bob", key=KEY)]
    assert sorted(alice) == sorted(bob) == signed.sealed and alice != bob
    assert alice == [i.run_id for i in review_queue(p, "camp", "reviewer-alice", key=KEY)]

    for regular in (
        "/",
        "/campaign/camp",
        "/campaign/camp/judges",
        f"/run/{signed.sealed[0]}",
        "/live",
    ):
        assert (await review.get(regular)).status_code in (200, 404), regular
        assert "agent_0" not in (await review.get(regular)).text


async def test_grading_page_shows_rubric_anchors_files_and_transcript_blind(
    signed: Signed, review: httpx.AsyncClient
) -> None:
    page = await review.get(await _first(review))
    assert page.status_code == 200
    assert 'name="csrf"' in page.text and 'name="score_' in page.text
    assert "<dt>8</dt>" in page.text and "Transcript" in page.text and "Sealed files" in page.text
    for secret in _secrets(signed):
        assert secret not in page.text, secret
    file_link = re.search(r'href="(/review/camp/run/[0-9a-f]{32}/file\?path=[^"]+)"', page.text)
    assert file_link is not None
    shown = await review.get(file_link.group(1).replace("&amp;", "&"))
    assert shown.status_code == 200


async def test_the_form_refuses_what_its_own_page_did_not_send(
    bus: Bus,
    settings: Settings,
    signed: Signed,
    review: httpx.AsyncClient,
    viewer: httpx.AsyncClient,
) -> None:
    url = await _first(review)
    page = await review.get(url)
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    assert csrf is not None
    p = await projections(bus, settings)
    scores = {f"score_{k}": str(v) for k, v in rubric_scores(p, 9).items()}
    good = {"csrf": csrf.group(1), **scores, "note": "<script>alert(1)</script>"}
    before = (await viewer.get("/campaign/camp/validity.json")).json()
    assert before["human_verdicts"] == 0 and before["rows"] == []

    cases = [
        ({**good, "csrf": ""}, {}, 403),
        ({**good, "csrf": "0" * 32}, {}, 403),
        ({k: v for k, v in good.items() if k != "csrf"}, {}, 403),
        (good, {"origin": "http://evil.example"}, 403),
        (good, {"origin": "null"}, 403),  # a sandboxed frame's or a data: page's form
        (good, {"host": "evil.example"}, 421),
        ({**good, next(iter(scores)): "11"}, {}, 400),
        ({**good, next(iter(scores)): "-1"}, {}, 400),
        ({**good, next(iter(scores)): "7.5"}, {}, 400),
        ({**good, "score_invented": "5"}, {}, 400),
        ({k: v for k, v in good.items() if k != next(iter(scores))}, {}, 400),
        ({**good, "note": "x" * 5000}, {}, 400),
    ]
    for form, headers, status in cases:
        got = await review.post(url, data=form, headers=headers)
        assert got.status_code == status, (form, headers, got.text[:300])
    huge = await review.post(
        url,
        content=b"a=" + b"x" * MAX_FORM_BYTES,
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert huge.status_code == 413
    as_json = await review.post(url, json=good)
    assert as_json.status_code == 415
    assert (await projections(bus, settings)).state.human_verdicts == {}
    assert (await viewer.post("/campaign/camp", data=good)).status_code == 405

    done = await review.post(url, data=good)
    assert done.status_code == 200, done.text
    assert "Verdict recorded" in done.text and "signed by reviewer-alice" in done.text
    again = await review.post(url, data=good)
    assert again.status_code in (400, 404) and "already graded" in again.text
    after = await projections(bus, settings)
    [v] = after.state.human_verdicts.values()
    assert v.judge_id == "reviewer-alice" and set(v.scores.values()) == {9}
    now = (await viewer.get("/campaign/camp/validity.json")).json()
    assert now["human_verdicts"] == 1 and {r["subject_kind"] for r in now["rows"]} >= {"jury"}
    assert any("too few" in w or "fewer" in w or "human" in w for w in now["warnings"])
    judges = await viewer.get("/campaign/camp/judges")
    assert "Judge validity (human)" in judges.text and 'id="human-rows"' in judges.text
