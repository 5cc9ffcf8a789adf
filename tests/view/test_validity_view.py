"""The campaign page of a campaign with control runs shows the Judge validity section."""

from __future__ import annotations

import httpx

from assay.bus import Bus
from assay.config import Settings
from assay_testing.synthetic_log import publish_events
from assay_viewer import Source, create_app
from tests.aggregator.test_controls_fold import KEY, C, _log


async def test_the_campaign_page_shows_judge_validity(bus: Bus, settings: Settings) -> None:
    events, _ = _log(humans=True)
    await publish_events(bus.js, bus.subjects, bus.stream.name, events)
    # The viewer opens the declarations with the deployment's key: the one they were sealed with.
    keyed = settings.model_copy(update={"controls_secret": KEY.secret.hex()})
    source = Source(keyed, resamples=100)
    transport = httpx.ASGITransport(app=create_app(source))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            page = await c.get(f"/campaign/{C}")
    finally:
        await source.close()
    assert page.status_code == 200
    html = page.text
    assert '<section id="judge-validity">' in html
    assert "12 control run(s)" in html
    for title in (
        "Judges on control runs",
        "Pass share corrected",
        "Agreement with human verdicts",
    ):
        assert title in html
