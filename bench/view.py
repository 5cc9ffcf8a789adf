"""Viewer bench: campaign, runs-table and run page loads for a K-Bench campaign (1,602 runs).

The K-Bench log (bench.aggregator's KBENCH, its blobs in the store) is published to a
real nats-server in a temp dir; the viewer app is driven in-process through httpx's ASGI
transport, as its tests drive it. Each page is loaded once to warm up (the first campaign
page builds the report with 10,000 resamples, then `Source` keeps it for that log
version), then timed as the median of several loads, against the static CSS served by the
same app in the same run. The runs table is timed filtered and sorted (the URL's state), and
searched (the fold indexes prompts, answers and transcripts as it goes; the first search is
timed apart).
``python -m bench.view``.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from assay.bus import Bus
from assay.config import Settings
from assay.embedded import NatsServer
from assay.store import open_store
from assay_testing.synthetic_log import publish_events, synthetic_events
from assay_viewer import Source, create_app
from bench.table import Row

from .aggregator import KBENCH

__all__ = ["bench_view"]

LOADS = 7
TARGET = "< 300 ms"
FILTERED = "?agent=agent_3&tag=overclaiming&min=4&sort=spread&order=desc"
SEARCH = "?q=estimate+results&sort=cost&order=desc&page=2"


async def _publish(settings: Settings) -> int:
    store = open_store(settings)
    async with Bus(settings, service="bench") as bus:
        return await publish_events(
            bus.js, bus.subjects, bus.stream.name, synthetic_events(KBENCH, store=store)
        )


async def _median_ms(client: httpx.AsyncClient, url: str) -> float:
    times: list[float] = []
    for _ in range(LOADS):
        t0 = time.perf_counter()
        got = await client.get(url)
        times.append((time.perf_counter() - t0) * 1000)
        assert got.status_code == 200, (url, got.status_code)
    return statistics.median(times)


async def _first_run(client: httpx.AsyncClient, campaign: str) -> str:
    page = (await client.get(f"/campaign/{campaign}")).text
    return page.split('href="/run/', 1)[1].split('"', 1)[0]


async def _measure(settings: Settings, n_events: int) -> list[Row]:
    source = Source(settings)  # the viewer's own default: 10,000 resamples
    transport = httpx.ASGITransport(app=create_app(source))
    campaign_url = f"/campaign/{KBENCH.campaign_id}"
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            t0 = time.perf_counter()
            run_id = await _first_run(client, KBENCH.campaign_id)  # folds + builds the report
            cold_ms = (time.perf_counter() - t0) * 1000
            await client.get(f"/run/{run_id}")
            css_ms = await _median_ms(client, "/static/view.css")
            campaign_ms = await _median_ms(client, campaign_url)
            filtered_ms = await _median_ms(client, campaign_url + FILTERED)
            t0 = time.perf_counter()
            await client.get(campaign_url + SEARCH)  # the fold has indexed the log already
            index_ms = (time.perf_counter() - t0) * 1000
            search_ms = await _median_ms(client, campaign_url + SEARCH)
            run_ms = await _median_ms(client, f"/run/{run_id}")
    finally:
        await source.close()
    runs = KBENCH.n_tasks * KBENCH.n_agents * KBENCH.n_epochs
    base = "GET /static/view.css, same app"
    return [
        Row(
            "view",
            f"K-Bench: first campaign page ({n_events} events folded and indexed, report built)",
            cold_ms,
            "ms",
        ),
        Row(
            "view",
            f"K-Bench: campaign page, {runs:,} runs (warm, median of {LOADS})",
            campaign_ms,
            "ms",
            css_ms,
            base,
            TARGET,
        ),
        Row(
            "view",
            f"K-Bench: campaign page filtered and sorted ({FILTERED}, warm)",
            filtered_ms,
            "ms",
            css_ms,
            base,
            TARGET,
        ),
        Row("view", "K-Bench: first search (the fold built the index)", index_ms, "ms"),
        Row(
            "view",
            f"K-Bench: campaign page searched ({SEARCH}, warm)",
            search_ms,
            "ms",
            css_ms,
            base,
            TARGET,
        ),
        Row(
            "view",
            f"K-Bench: run page, {KBENCH.steps_per_run} steps (warm, median of {LOADS})",
            run_ms,
            "ms",
            css_ms,
            base,
            TARGET,
        ),
    ]


def bench_view() -> list[Row]:
    """Page loads of the viewer over a K-Bench campaign, against its static CSS."""
    with tempfile.TemporaryDirectory() as tmp, NatsServer(Path(tmp) / "nats") as server:
        settings = Settings(nats_url=server.url, home=Path(tmp), stream="KBV", subject_prefix="kbv")
        n = asyncio.run(_publish(settings))
        return asyncio.run(_measure(settings, n))


def main() -> None:
    """Print the viewer rows."""
    from bench.table import print_rows

    print_rows(bench_view())


if __name__ == "__main__":
    main()
