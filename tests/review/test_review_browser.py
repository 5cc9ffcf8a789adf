"""Human review end to end in headless Chromium: a reviewer opens the blind queue, grades
a run on the rubric, the signed verdict lands on the log, and the judges page's
"Judge validity (human)" table updates live; a reviewer whose key this operator never
enrolled submits the same form and the log refuses the verdict."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay_viewer import Source, create_app
from assay_viewer.review import ReviewDesk
from tests.served import serve
from tests.view.test_playwright import _WATCH, Watched, browser  # noqa: F401  (fixture)

from .conftest import PAYLOAD, Signed, enroll, foreign_reviewer, projections

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page

from playwright import async_api

pytestmark = pytest.mark.slow


async def _watched(browser: Browser, base: str) -> Watched:  # noqa: F811
    context = await browser.new_context(base_url=base, viewport={"width": 1280, "height": 900})
    await context.add_init_script(_WATCH)
    return Watched(await context.new_page())


async def _grade(page: Page, score: str) -> None:
    """Open the queue, follow its first run, score every dimension, submit."""
    await page.goto("/review/camp")
    await page.locator("a.grade").first.click()
    await async_api.expect(page.locator("h1")).to_have_text("Grade this run")
    # The agent's markup is on the page as text, and nothing says who wrote it.
    await async_api.expect(page.locator("#final")).to_contain_text(PAYLOAD)
    await async_api.expect(page.locator("body")).not_to_contain_text("agent_")
    await async_api.expect(page.locator("body")).not_to_contain_text("judge_a")
    for field in await page.locator('form#grade input[type="number"]').all():
        await field.fill(score)
    await page.locator('form#grade textarea[name="note"]').fill("read every file")
    await page.locator('form#grade button[type="submit"]').click()


async def test_grade_a_run_in_the_browser_and_watch_the_validity_table_move(
    browser: Browser,  # noqa: F811
    bus: Bus,
    settings: Settings,
    signed: Signed,
    tmp_path: Path,
) -> None:
    enroll(settings, "alice")
    foreign_reviewer(settings, tmp_path, "mallory")
    sources = [Source(settings, resamples=200) for _ in range(3)]
    apps = [
        create_app(sources[0]),
        create_app(sources[1], review=ReviewDesk(settings, "alice")),
        create_app(sources[2], review=ReviewDesk(settings, "mallory")),
    ]
    try:
        async with serve(apps[0]) as viewer, serve(apps[1]) as alice, serve(apps[2]) as mallory:
            judges = await _watched(browser, viewer)
            await judges.page.goto("/campaign/camp/judges")
            await async_api.expect(judges.page.locator("#human-count")).to_have_text("0")
            await async_api.expect(judges.page.locator("#human-rows tr")).to_have_count(0)

            grader = await _watched(browser, alice)
            await _grade(grader.page, "9")
            await async_api.expect(grader.page.locator("#outcome")).to_have_text("Verdict recorded")
            await async_api.expect(grader.page.locator("#detail")).to_contain_text(
                "signed by reviewer-alice"
            )
            p = await projections(bus, settings)
            assert p.state.refused == {}
            [verdict] = p.state.human_verdicts.values()
            assert verdict.judge_id == "reviewer-alice" and set(verdict.scores.values()) == {9}

            # Live: the judges page, drawn before the verdict, shows it without a reload.
            await async_api.expect(judges.page.locator("#human-count")).to_have_text(
                "1", timeout=20_000
            )
            rows = judges.page.locator("#human-rows tr")
            await async_api.expect(rows.filter(has_text="jury")).to_have_count(1)
            await async_api.expect(rows.filter(has_text="judge_a")).to_have_count(1)

            intruder = await _watched(browser, mallory)
            await _grade(intruder.page, "1")
            await async_api.expect(intruder.page.locator("#outcome")).to_have_text(
                "Refused by the log"
            )
            await async_api.expect(intruder.page.locator("#detail")).to_contain_text(
                "enrollment not signed by the operator"
            )
            # The refusal page's own status (409) is the one console error expected.
            assert [e for e in intruder.errors if "409 (Conflict)" in e]
            intruder.errors[:] = [e for e in intruder.errors if "409 (Conflict)" not in e]
            after = await projections(bus, settings)
            assert len(after.state.human_verdicts) == 1 and len(after.state.refused) == 1
            await judges.page.wait_for_timeout(1000)
            await async_api.expect(judges.page.locator("#human-count")).to_have_text("1")
            for name, w in (("judges", judges), ("alice", grader), ("mallory", intruder)):
                await w.assert_no_script_ran(name)
                await w.page.context.close()  # its event streams end before the servers do
    finally:
        for source in sources:
            await source.close()
