"""The review desk as a work tool (issue #53, item 7): after a grade the header still
names the reviewer and offers the next run; a reviewer without a key is told the command
that enrols one in this home; a note written like a formula is stored as written and made
inert when human verdicts are exported to CSV (OWASP's advice on CSV injection)."""

from __future__ import annotations

import csv
import io
import re

import httpx
import pytest

from assay.bus import Bus
from assay.config import Settings
from assay_viewer import Source, create_app
from assay_viewer.grading import ReviewerNotEnrolled, spreadsheet_cell
from assay_viewer.review import ReviewDesk
from tests.served import serve
from tests.view.test_playwright import WIDTHS, browser  # noqa: F401  (fixture)

from .conftest import Signed, projections, rubric_scores

from playwright.async_api import Browser, expect  # isort: skip

FORMULAS = [
    '=HYPERLINK("http://evil.example","x")',
    "+1+1",
    "-2+3",
    "@SUM(A1)",
    "\tindented",
    "\rreturn",
    "=1+1\nsecond line",
]
"""Notes a spreadsheet would read as formulas (OWASP's leading characters)."""


async def _grade(review: httpx.AsyncClient, scores: dict[str, str], note: str, n: int) -> str:
    """Grade the `n`-th run of the queue with `scores` and `note`; the outcome page."""
    queue = await review.get("/review/camp")
    url = re.findall(r'href="(/review/camp/run/[0-9a-f]{32})"', queue.text)[n]
    page = await review.get(url)
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    assert csrf is not None
    done = await review.post(url, data={"csrf": csrf.group(1), **scores, "note": note})
    assert done.status_code == 200, done.text
    return done.text


def test_a_reviewer_without_a_key_is_told_the_command_for_this_home(settings: Settings) -> None:
    with pytest.raises(ReviewerNotEnrolled) as refused:
        ReviewDesk(settings, "nobody")
    assert f"`assay keys enroll reviewer-nobody --home {settings.home}`" in str(refused.value)


async def test_after_a_grade_the_header_names_the_reviewer_and_links_the_next_run(
    bus: Bus, settings: Settings, signed: Signed, review: httpx.AsyncClient
) -> None:
    p = await projections(bus, settings)
    scores = {f"score_{k}": str(v) for k, v in rubric_scores(p, 7).items()}
    done = await _grade(review, scores, "fine", 0)
    assert "Verdict recorded" in done
    assert "grading as reviewer-alice" in done
    following = re.search(r'id="next-run" href="(/review/camp/run/[0-9a-f]{32})"', done)
    assert following is not None
    # The next run is the queue's first, now that the graded one has left it.
    queue = await review.get("/review/camp")
    assert re.findall(r'href="(/review/camp/run/[0-9a-f]{32})"', queue.text)[0] == following[1]
    page = await review.get(following[1])
    assert page.status_code == 200 and "Grade this run" in page.text
    # A refusal names the reviewer too.
    refused = await review.post(following[1], data={"csrf": "0" * 32})
    assert refused.status_code == 403 and "grading as reviewer-alice" in refused.text


def test_a_cell_that_starts_like_a_formula_is_made_text() -> None:
    for note in FORMULAS:
        assert spreadsheet_cell(note) == "'" + note
    for note in ("plain", "a = b", "", "'=already quoted", "1-2"):
        assert spreadsheet_cell(note) == note


async def test_a_formula_note_is_stored_as_written_and_exported_inert(
    bus: Bus,
    settings: Settings,
    signed: Signed,
    review: httpx.AsyncClient,
    viewer: httpx.AsyncClient,
) -> None:
    p = await projections(bus, settings)
    scores = {f"score_{k}": str(v) for k, v in rubric_scores(p, 6).items()}
    for n, note in enumerate(FORMULAS[:3]):
        await _grade(review, scores, note, 0)  # the graded run leaves the queue
        assert n < len(signed.sealed)
    after = await projections(bus, settings)
    assert len(after.state.human_verdicts) == 3
    got = await viewer.get("/campaign/camp/human-verdicts.csv")
    assert got.status_code == 200 and got.headers["content-type"].startswith("text/csv")
    assert "attachment" in got.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(got.text, newline="")))
    assert sorted(r["note"] for r in rows) == sorted("'" + n for n in FORMULAS[:3])
    assert {r["reviewer"] for r in rows} == {"reviewer-alice"}
    assert all(r[k] == "6" for r in rows for k in rubric_scores(p, 6))
    # Stored as written: the verdict events carry the notes unchanged.
    notes = set()
    for run_id in {v.run_id for v in after.state.human_verdicts.values()}:
        view = await Source(settings, resamples=200).run(run_id)
        assert view is not None
        notes |= {e.rationale for e in view.history.verdicts.values() if e.judge_kind == "human"}
    assert notes == set(FORMULAS[:3])
    judges = await viewer.get("/campaign/camp/judges")
    assert 'href="/campaign/camp/human-verdicts.csv"' in judges.text


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
async def test_in_the_browser_a_grade_leads_to_the_next_run(
    browser: Browser,  # noqa: F811
    bus: Bus,
    settings: Settings,
    desk: ReviewDesk,
    width: int,
) -> None:
    source = Source(settings, resamples=200)
    async with serve(create_app(source, review=desk)) as base:
        context = await browser.new_context(base_url=base, viewport={"width": width, "height": 900})
        page = await context.new_page()
        await page.goto("/review/camp")
        await page.locator("a.grade").first.click()
        first = page.url
        for field in await page.locator('form#grade input[type="number"]').all():
            await field.fill("8")
        await page.locator('form#grade textarea[name="note"]').fill("=1+1")
        await page.locator('form#grade button[type="submit"]').click()
        await expect(page.locator("#outcome")).to_have_text("Verdict recorded")
        await expect(page.locator("nav #reviewer")).to_contain_text("grading as reviewer-alice")
        await page.locator("a#next-run").click()
        await expect(page.locator("h1")).to_have_text("Grade this run")
        assert page.url != first
        await context.close()
    await source.close()
