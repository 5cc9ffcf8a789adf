"""The viewer as a work tool (issue #53, item 6), in headless Chromium at 1280 and 800 px:
compare any runs ticked in the runs table; headers and tags never broken inside a word;
the runs table whole at 800 px; control runs labelled with their variant outside review
mode; a web source a judge opened named as one."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import TYPE_CHECKING

import httpx
import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.security.controls import ControlsKey, controls_key
from assay_schemas import (
    ArtifactsSealed,
    ControlDetails,
    Event,
    Producer,
    RunRequested,
    TaskSubmitted,
)
from assay_testing.synthetic_log import publish_events
from assay_viewer.pages import view_environment
from assay_viewer.runs import MAX_COMPARED

from .conftest import DISPUTED, HOSTILE, Published
from .test_playwright import WIDTHS, Watched, browser, page  # noqa: F401  (fixtures)

if TYPE_CHECKING:
    from playwright.async_api import Page

from playwright import async_api

pytestmark = pytest.mark.slow

CONTROL = "control-run"
CONTROL_AGENT = "c0ffee1234abcd"
"""A control agent's salted id: hex, like the runner's."""

_BROKEN_WORDS = """([selector, word]) => {
  const broken = [];
  for (const el of document.querySelectorAll(selector)) {
    const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      for (const m of n.data.matchAll(new RegExp(word, "g"))) {
        const r = document.createRange();
        r.setStart(n, m.index);
        r.setEnd(n, m.index + m[0].length);
        const lines = new Set([...r.getClientRects()].filter((b) => b.width > 0)
                                                    .map((b) => Math.round(b.bottom)));
        if (lines.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
}"""
"""Every word (`word`: a pattern) of the elements `selector` picks that a line break cuts."""
WORD = r"\S+"
SNAKE_WORD = r"[^\s_]+_?"
"""A word of a snake_case name: a break after its underscore is between words."""


def _control_run(published: Published, key: ControlsKey) -> list[Event]:
    """A copy of a sealed run under a control agent's hex id, declared (sealed with the
    deployment's `key`, as the runner does) a known-bad control."""
    seal = next(
        e
        for e in published.events
        if isinstance(e, ArtifactsSealed) and e.files and e.run_id not in (HOSTILE, DISPUTED)
    )
    out: list[Event] = []
    for e in published.events:
        if e.run_id != seal.run_id:
            continue
        update: dict[str, object] = {"run_id": CONTROL, "event_id": f"control-{e.event_id}"}
        if isinstance(e, RunRequested):
            update["agent"] = e.agent.model_copy(update={"agent_id": CONTROL_AGENT})
        elif "agent_id" in type(e).model_fields:
            update["agent_id"] = CONTROL_AGENT
        out.append(e.model_copy(update=update))
    details = ControlDetails(
        campaign_id=seal.campaign_id,
        task_id=seal.task_id,
        control_run_id=CONTROL,
        variant="altered_numbers",
        expected="fail",
        plan_sha256="a" * 64,
        agent_id=CONTROL_AGENT,
    )
    declared = key.declare(
        details, causation_id=None, producer=Producer(service="cli", version="0")
    )
    return [declared, *out]


@pytest.fixture
async def with_control(bus: Bus, settings: Settings, hostile: Published) -> Published:
    """The viewer's log with one declared control run added after it."""
    events = _control_run(hostile, controls_key(settings))
    await publish_events(bus.js, bus.subjects, bus.stream.name, events)
    return hostile._replace(events=[*hostile.events, *events])


async def _at(p: Page, width: int, url: str) -> None:
    await p.set_viewport_size({"width": width, "height": 900})
    response = await p.goto(url)
    assert response is not None and response.ok, url


@pytest.mark.parametrize("width", WIDTHS)
async def test_compare_takes_any_runs_ticked_in_the_runs_table(
    page: Watched,  # noqa: F811
    width: int,
) -> None:
    p = page.page
    await _at(p, width, "/campaign/camp")
    rows = p.locator("table.runs tr[data-run]")
    # Three runs from the middle and the end of the table, not a task's first two.
    picks = [await rows.nth(i).get_attribute("data-run") for i in (3, 7, await rows.count() - 1)]
    for run in picks:
        await p.locator(f'tr[data-run="{run}"] input[type="checkbox"][name="run"]').check()
    await p.locator("form#compare button[type=submit]").click()
    await async_api.expect(p.locator("h1")).to_have_text("Compare")
    cards = p.locator("div.card.wide h2 a")
    await async_api.expect(cards).to_have_count(3)
    shown = [
        h.removeprefix("/run/")
        for h in await cards.evaluate_all("(as) => as.map((a) => a.getAttribute('href'))")
    ]
    assert shown == picks
    wide = await p.evaluate("() => document.documentElement.scrollWidth")
    assert wide <= width
    # The task page ticks its own cards into the same compare form.
    await _at(p, width, "/campaign/camp/task/" + (await _first_task(p)))
    boxes = p.locator('div.card input[type="checkbox"][name="run"]')
    assert await boxes.count() >= 2
    await boxes.nth(await boxes.count() - 1).check()
    await boxes.nth(await boxes.count() - 2).check()
    await p.locator("form#compare button[type=submit]").click()
    await async_api.expect(p.locator("div.card.wide")).to_have_count(2)
    await page.assert_no_script_ran(f"compare at {width}")


async def _first_task(p: Page) -> str:
    await p.goto("/campaign/camp")
    href = await p.locator('table.runs a[href^="/campaign/camp/task/task_"]').first.get_attribute(
        "href"
    )
    return str(href).rsplit("/", 1)[-1]


async def test_compare_refuses_too_few_too_many_and_unknown_runs(
    client: httpx.AsyncClient, hostile: Published
) -> None:
    runs = sorted({e.run_id or "" for e in hostile.events if isinstance(e, ArtifactsSealed)})
    one = await client.get("/compare", params={"run": runs[0]})
    assert one.status_code == 400 and "two or more" in one.text
    many = await client.get("/compare", params=[("run", r) for r in runs[: MAX_COMPARED + 1]])
    assert many.status_code == 400 and f"at most {MAX_COMPARED}" in many.text
    bad = await client.get("/compare", params=[("run", runs[0]), ("run", "<script>")])
    assert bad.status_code == 400 and "<script>" not in bad.text
    unknown = await client.get("/compare", params=[("run", runs[0]), ("run", "no-such-run")])
    assert unknown.status_code == 404 and "no-such-run" in unknown.text
    twice = await client.get("/compare", params=[("run", runs[0]), ("run", runs[0])])
    assert twice.status_code == 400  # the same run twice is one run
    older = await client.get("/compare", params={"a": runs[0], "b": runs[1]})
    assert older.status_code == 200 and older.text.count('class="card wide"') == 2


@pytest.mark.parametrize("width", WIDTHS)
async def test_headers_and_tags_break_between_words_and_the_runs_table_fits(
    page: Watched,  # noqa: F811
    width: int,
) -> None:
    p = page.page
    for url in ("/campaign/camp", "/campaign/camp/report", "/campaign/camp/judges"):
        await _at(p, width, url)
        broken = await p.evaluate(_BROKEN_WORDS, ["th", WORD])
        assert broken == [], (url, width)
    await _at(p, width, "/campaign/camp")
    assert await p.locator("table.runs span.word").count() > 0, "the fixture has tags"
    assert await p.evaluate(_BROKEN_WORDS, ["table.runs td.wrap:not(.match)", SNAKE_WORD]) == []
    # Whole at this width: no column hidden past the right edge, nothing to scroll to.
    fit = await p.evaluate("""() => { const t = document.querySelector('table.runs');
        const last = t.querySelector('tr th:last-child').getBoundingClientRect();
        return [t.scrollWidth - t.clientWidth, last.right, window.innerWidth]; }""")
    hidden, right, inner = fit
    assert hidden <= 1 and right <= inner, (width, fit)
    await page.assert_no_script_ran(f"runs table at {width}")


@pytest.mark.parametrize("width", WIDTHS)
async def test_a_control_run_is_labelled_with_its_variant(
    page: Watched,  # noqa: F811
    with_control: Published,
    width: int,
) -> None:
    p = page.page
    await _at(p, width, "/campaign/camp")
    row = p.locator(f'table.runs tr[data-run="{CONTROL}"]')
    await async_api.expect(row.locator("span.control")).to_have_text(
        "control: altered_numbers, expected to fail"
    )
    # Scored as judge validity scores it (the jury's mean), though no figure counts it.
    await async_api.expect(row.locator("td.num").nth(1)).to_have_text(re.compile(r"^\d+(\.\d+)?$"))
    agents = p.locator("table.runs tr[data-run] span.control")
    await async_api.expect(agents).to_have_count(1)  # no agent's run is called a control
    await _at(p, width, f"/run/{CONTROL}")
    await async_api.expect(p.locator("p.control")).to_contain_text("altered_numbers")
    task = next(e.task_id for e in with_control.events if e.run_id == CONTROL)
    await _at(p, width, f"/campaign/camp/task/{task}")
    await async_api.expect(p.locator(f'div.card[data-run="{CONTROL}"] p.control')).to_contain_text(
        "altered_numbers"
    )
    await page.assert_no_script_ran(f"control at {width}")


def test_a_web_source_a_judge_opened_is_named_as_one() -> None:
    # A judge opens the agent's web answers as `web-source:N` (assay_judge.files): they
    # were never sealed files, so "opened but not sealed" would accuse the judge wrongly.
    verdict = SimpleNamespace(
        judge_id="judge_a",
        sample=0,
        family="f",
        model="m",
        scores={},
        tags=[],
        rationale="",
        checks=[],
        files_opened=["results.csv", "web-source:1", "ghost.txt"],
        cited_not_opened=[],
        opened_not_sealed=["ghost.txt", "web-source:1"],
    )
    audit = SimpleNamespace(verdicts=[verdict], failures=[])
    html = (
        view_environment()
        .from_string('{% import "view/run_parts.html.j2" as parts %}{{ parts.verdicts(a) }}')
        .render(a=audit)
    )
    assert "opened but not sealed: ghost.txt; web sources opened: web-source:1 " in html


async def test_an_ampersand_in_what_the_judges_were_given_is_escaped_once(
    client: httpx.AsyncClient, bus: Bus, hostile: Published
) -> None:
    # The viewer escapes a task's text once; `&amp;` in a judge's own prompt is the judge
    # service's delimiting (assay_judge.delimit), not something this page adds.
    request = next(e for e in hostile.events if isinstance(e, RunRequested))
    task = request.task.model_copy(
        update={
            "task_id": "amp-task",
            "prompt": "Compare R&D spend & output",
            "judge": request.task.judge.model_copy(update={"system_prompt": "Check Q&A pairs"}),
        }
    )
    submitted = TaskSubmitted(
        event_id="amp-task-submitted",
        campaign_id=request.campaign_id,
        task_id="amp-task",
        task=task,
        producer=request.producer,
    )
    run = request.model_copy(
        update={"event_id": "amp-run", "run_id": "amp-run", "task_id": "amp-task", "task": task}
    )
    await publish_events(bus.js, bus.subjects, bus.stream.name, [submitted, run])
    html = (await client.get("/campaign/camp/task/amp-task")).text
    assert "Compare R&amp;D spend &amp; output" in html and "Check Q&amp;A pairs" in html
    assert "&amp;amp;" not in html
