"""The viewer in headless Chromium driven by Playwright: every page kind screenshotted,
a click-through by real clicks, a step drawn live, and no agent-written script running."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import pytest

from assay.bus import Bus
from assay_schemas import AgentStepLogged, JudgmentRecorded, RunRequested
from assay_testing.synthetic_log import publish_events

from .conftest import DISPUTED, HOSTILE, IMG, PAYLOAD, PYTHON_CODE, SCRIPT, SEARCHED, Published

if TYPE_CHECKING:
    from playwright.async_api import Browser, ConsoleMessage, Dialog, Page

# Both come with `make test` (playwright is a dev dependency; scripts/setup-host.sh test
# installs chromium): their absence is a broken set-up and fails, it never skips.
from playwright import async_api

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium: Playwright's own browser download is not used."""
assert CHROMIUM.exists(), f"{CHROMIUM} is missing: run `make test` (it installs chromium)"

pytestmark = pytest.mark.slow

# Whatever agent markup could do if it ran: set a flag, open a dialog, break the CSP.
_WATCH = """
window.__pwned = false;
window.__violations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
"""
_PWNED = "() => window.__pwned || document.title === 'PWNED' || document.body.dataset.pwned === '1'"


class Watched:
    """A page, and every dialog and console error it has produced."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _console(self, message: ConsoleMessage) -> None:
        where = message.location.get("url", "")
        if message.type == "error" and not where.endswith("/favicon.ico"):
            self.errors.append(f"{message.text} ({where})")

    async def _dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(dialog.message)
        await dialog.dismiss()

    async def assert_no_script_ran(self, name: str) -> None:
        """Nothing agent-written ran, and nothing was stopped only by the CSP."""
        assert not await self.page.evaluate(_PWNED), name
        assert await self.page.evaluate("() => window.__violations") == [], name
        assert self.dialogs == [] and self.errors == [], name


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """Debian's Chromium, headless, with nothing reaching beyond loopback."""
    async with async_api.async_playwright() as p:
        chromium = await p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-quic",
            ],
        )
        yield chromium
        await chromium.close()


@pytest.fixture
async def page(browser: Browser, served: str) -> AsyncIterator[Watched]:
    """A fresh page on the served viewer, watched for dialogs, errors and CSP violations."""
    context = await browser.new_context(base_url=served, viewport={"width": 1280, "height": 900})
    await context.add_init_script(_WATCH)
    watched = Watched(await context.new_page())
    yield watched
    await context.close()


async def _hrefs(page: Page, selector: str) -> list[str]:
    return list(
        await page.locator(selector).evaluate_all("(as) => as.map((a) => a.getAttribute('href'))")
    )


WIDTHS = (1280, 800)


async def test_every_page_kind_is_screenshotted_into_the_report(
    page: Watched, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    p = page.page
    await p.goto(f"/run/{HOSTILE}")
    file_link = (await _hrefs(p, f'ul.tree a[href^="/run/{HOSTILE}/file"]'))[0]
    await p.goto("/campaign/camp")
    other = next(
        h
        for h in await _hrefs(p, 'table.runs a[href^="/run/"]')
        if HOSTILE not in h and "evil" not in h
    )
    task = (await _hrefs(p, 'table.runs a[href^="/campaign/camp/task/"]'))[0]
    pages = {
        "campaign": ("/campaign/camp", "Campaign camp"),
        "filtered": (f"/campaign/camp?sort=spread&order=desc&q={SEARCHED}", "1 run(s) selected"),
        "report": ("/campaign/camp/report", "Full report of camp"),
        "task": (task, "Runs side by side"),
        "run": (f"/run/{DISPUTED}", "Timeline"),
        "hostile-run": (f"/run/{HOSTILE}", "Transcript"),
        "file": (file_link, "sha256"),
        "compare": (f"/compare?a={HOSTILE}&b={other.removeprefix('/run/')}", "Transcript"),
        "judges": ("/campaign/camp/judges", "Where judges disagree most"),
    }
    shots = tmp_path / "screenshots"
    shots.mkdir()
    for width in WIDTHS:
        await p.set_viewport_size({"width": width, "height": 900})
        for name, (url, expected) in pages.items():
            response = await p.goto(url)
            assert response is not None and response.ok, name
            await async_api.expect(p.locator("body")).to_contain_text(expected)
            # Tables wrap their text at any width: nothing runs off the side of the page.
            wide = await p.evaluate("() => document.documentElement.scrollWidth")
            assert wide <= width, (name, width, wide)
            png = shots / f"{name}-{width}.png"
            await p.screenshot(path=str(png), full_page=True)
            assert png.stat().st_size > 5_000, name
            # Attached to the report: junitxml writes these as <property>, any reporter sees them.
            request.node.user_properties.append((f"screenshot:{name}-{width}", str(png)))
            await page.assert_no_script_ran(f"{name} at {width}")
    print(f"screenshots: {shots}")


async def _shown_runs(p: Page) -> list[str]:
    return list(
        await p.locator("table.runs tr[data-run]").evaluate_all(
            "(rows) => rows.map((r) => r.dataset.run)"
        )
    )


async def test_filter_sort_and_search_in_the_form_and_the_url_brings_the_view_back(
    page: Watched, browser: Browser, served: str, hostile: Published
) -> None:
    p = page.page
    await p.goto("/campaign/camp")
    # Filter to a planted set: agent_0's runs a judge tagged overclaiming.
    planted = {
        e.run_id
        for e in hostile.events
        if isinstance(e, JudgmentRecorded)
        and "overclaiming" in e.failure_tags
        and e.run_id in _runs_of(hostile, "agent_0")
    }
    assert planted
    await p.select_option('form.filters select[name="agent"]', "agent_0")
    await p.select_option('form.filters select[name="tag"]', "overclaiming")
    await p.click('form.filters button[type="submit"]')
    await async_api.expect(p).to_have_url(re.compile(r"agent=agent_0.*tag=overclaiming"))
    assert set(await _shown_runs(p)) == planted
    # Sort by judge disagreement: the planted most-disputed run comes first.
    await p.goto("/campaign/camp")
    await p.select_option('form.filters select[name="sort"]', "spread")
    await p.select_option('form.filters select[name="order"]', "desc")
    await p.click('form.filters button[type="submit"]')
    assert (await _shown_runs(p))[0] == DISPUTED
    # Clicking the sorted header again turns the order round; the planted run goes last
    # among the runs two judges rated.
    await p.locator("table.runs th a.sort.on").click()
    await async_api.expect(p).to_have_url(re.compile(r"\?sort=spread#runs$"))  # asc: the default
    assert (await _shown_runs(p))[0] != DISPUTED
    # Search a word that occurs in one transcript.
    await p.fill('form.filters input[name="q"]', SEARCHED)
    await p.click('form.filters button[type="submit"]')
    assert await _shown_runs(p) == [DISPUTED]
    await async_api.expect(p.locator("td.match mark")).to_have_text(SEARCHED)
    # The URL alone reproduces the view, in a fresh browser context.
    url = p.url
    shown = await _shown_runs(p)
    fresh = await browser.new_context(base_url=served, viewport={"width": 800, "height": 900})
    again = await fresh.new_page()
    await again.goto(url)
    assert await _shown_runs(again) == shown
    assert await again.input_value('form.filters input[name="q"]') == SEARCHED
    assert await again.input_value('form.filters select[name="sort"]') == "spread"
    await fresh.close()
    await page.assert_no_script_ran("runs table")


def _runs_of(published: Published, agent: str) -> set[str]:
    return {
        e.run_id or ""
        for e in published.events
        if isinstance(e, RunRequested) and e.agent.agent_id == agent
    }


async def test_a_python_call_is_drawn_as_highlighted_code(page: Watched) -> None:
    p = page.page
    await p.goto(f"/run/{DISPUTED}")
    await async_api.expect(p).to_have_title(re.compile(r"^agent_\d · task_\d{4} · epoch 0$"))
    code = p.locator('#live-steps .call.code[data-tool="python"] .highlight pre')
    await async_api.expect(code).to_have_count(1)
    assert await code.inner_text() == PYTHON_CODE
    # Highlighted: the keyword is its own element, not one escaped line of JSON.
    await async_api.expect(code.locator("span.kn").first).to_have_text("import")
    assert "\\n" not in await code.inner_html()
    await async_api.expect(p.locator("svg.timeline g.step")).to_have_count(5)
    await page.assert_no_script_ran("python call")


async def test_query_strings_with_markup_run_nowhere(page: Watched) -> None:
    p = page.page
    query = urlencode({"q": PAYLOAD, "agent": PAYLOAD[:190], "tag": SCRIPT, "sort": IMG[:50]})
    await p.goto(f"/campaign/camp?{query}#runs")
    assert await p.input_value('form.filters input[name="q"]') == PAYLOAD
    await async_api.expect(p.locator("ul.notes")).to_contain_text("sort:")
    await page.assert_no_script_ran("echoed query")
    await p.goto("/campaign/camp?q=PWNED")
    await async_api.expect(p.locator(f'tr[data-run="{HOSTILE}"] td.match')).to_contain_text("PWNED")
    await page.assert_no_script_ran("search snippet")


async def test_click_through_from_the_runs_table_to_a_step_and_a_sealed_file(
    page: Watched, served: str
) -> None:
    p = page.page
    await p.goto("/")
    await p.locator('a[href="/campaign/camp"]').first.click()
    await async_api.expect(p).to_have_url(f"{served}/campaign/camp")
    await async_api.expect(p.locator("h1")).to_have_text("Campaign camp")
    # A run of an ordinary agent that sealed files: the last column counts them.
    row = p.locator("table.runs tr").filter(has=p.locator('a[href^="/run/"]'))
    row = row.filter(has_not=p.locator(f'a[href="/run/{HOSTILE}"]'))
    row = row.filter(has=p.locator("td:last-child", has_text=re.compile(r"^[1-9]\d*$"))).first
    run_link = row.locator('a[href^="/run/"]')
    run_url = served + str(await run_link.get_attribute("href"))
    await run_link.click()
    await async_api.expect(p).to_have_url(run_url)
    await async_api.expect(p.locator("h1")).to_contain_text(" · epoch ")
    await p.locator('#live-steps a[href="#step-0"]').click()
    await async_api.expect(p).to_have_url(f"{run_url}#step-0")
    step = p.locator("#step-0")
    await async_api.expect(step).to_be_visible()
    await async_api.expect(step).to_contain_text("tokens")
    sealed = p.locator("ul.tree a").first
    name = (await sealed.text_content() or "").strip()
    await sealed.click()
    await async_api.expect(p).to_have_url(re.compile(re.escape(run_url) + r"/file\?path="))
    await async_api.expect(p.locator("nav")).to_contain_text(name)
    await async_api.expect(p.locator("body")).to_contain_text("sha256")
    await page.assert_no_script_ran("click-through")


async def test_a_step_logged_while_the_run_page_is_open_is_drawn_in_place(
    page: Watched, bus: Bus, hostile: Published
) -> None:
    p = page.page
    step = next(e for e in hostile.events if isinstance(e, AgentStepLogged))
    await p.goto(f"/run/{step.run_id}")
    await async_api.expect(p.locator("#live-status")).to_have_text("live")
    await async_api.expect(p.locator("#step-99")).to_have_count(0)
    live = step.model_copy(
        update={"event_id": "live-step", "step": 99, "model_output": f"arrived live {PAYLOAD}"}
    )
    await publish_events(bus.js, bus.subjects, bus.stream.name, [live])
    drawn = p.locator("#live-steps ol.steps > li#step-99")
    await async_api.expect(drawn).to_be_visible(timeout=20_000)
    await async_api.expect(drawn.locator("h3")).to_have_text("step 99")
    # The agent's markup arrived as text: shown verbatim, never parsed.
    await async_api.expect(drawn.locator("pre").first).to_have_text(f"arrived live {PAYLOAD}")
    assert await drawn.locator("script, img").count() == 0
    await async_api.expect(p.locator("#live li.event").first).to_contain_text("AgentStepLogged")
    await page.assert_no_script_ran("live step")


async def test_the_hostile_agents_markup_runs_nowhere(page: Watched) -> None:
    p = page.page
    # The check can fail: the same payload as raw markup does run in this browser.
    await p.set_content(f"<!DOCTYPE html><html><body>{PAYLOAD}</body></html>")
    await p.wait_for_function(_PWNED)
    page.errors.clear()  # the control's own broken image
    await p.goto(f"/run/{HOSTILE}")
    await async_api.expect(p.locator("body")).to_contain_text("<script>document.title='PWNED'")
    await page.assert_no_script_ran("run")
    files = await _hrefs(p, f'ul.tree a[href^="/run/{HOSTILE}/file"]')
    assert len(files) == 8
    for url in files:
        response = await p.goto(url)
        assert response is not None and response.ok, url
        await page.assert_no_script_ran(url)
    # The markdown's javascript: link, clicked, does nothing either.
    await p.goto(next(u for u in files if u.endswith(".md")))
    for link in await p.locator("a", has_text="link").all():
        await link.click()
    await page.assert_no_script_ran("javascript: link")
    # And the violation check can fail: an inline script on a viewer page is refused.
    with pytest.raises(async_api.Error):
        await p.add_script_tag(content="window.__pwned = true")
    assert not await p.evaluate(_PWNED)
    assert await p.evaluate("() => window.__violations") != []
