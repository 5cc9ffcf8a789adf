"""Dependencies fail: the S3 endpoint goes away during sealing and judging; providers storm."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.embedded import find_free_port
from assay_schemas import AgentFinished, Event
from assay_testing.scripted import Fault

from .harness import (
    Baseline,
    Cast,
    ServiceSet,
    TcpProxy,
    campaign_complete,
    check_against_baseline,
    wait_until,
)

pytestmark = pytest.mark.timeout(240)

S3_OUTAGE_S = 12.0
"""Longer than the S3 client's own retries (about 6 s): handlers fail and are redelivered."""


@pytest.fixture
def s3_proxy(s3_endpoint: str) -> Iterator[TcpProxy]:
    """A proxy in front of the session's moto server: an outage without losing moto's data."""
    host, port = s3_endpoint.rsplit(":", 1)
    proxy = TcpProxy((host, int(port)), port=find_free_port()).start()
    try:
        yield proxy
    finally:
        proxy.stop()


def _first_finished(evs: list[Event]) -> bool:
    return any(isinstance(e, AgentFinished) for e in evs)


@pytest.mark.slow
async def test_s3_unavailable_during_sealing_and_judging(
    bus: Bus, settings: Settings, cast: Cast, base: Baseline, s3_proxy: TcpProxy
) -> None:
    from assay.store import open_store

    own = settings.model_copy(
        update={
            "store": "s3",
            "s3_endpoint": s3_proxy.endpoint,
            "s3_bucket": f"faults-{settings.subject_prefix}",
        }
    )
    store = open_store(own)
    async with ServiceSet.running(own, cast) as services:
        await cast.submit(bus, store)
        before = await wait_until(
            bus, _first_finished, timeout=90, services=services, what="a run to finish"
        )
        # From the first seal on, for a while: seals upload, judges download.
        s3_proxy.outage()
        print(f"\n[s3 outage] S3 unreachable after {len(before)} events, for {S3_OUTAGE_S}s")
        await asyncio.sleep(S3_OUTAGE_S)
        during = await wait_until(bus, lambda evs: True, timeout=10)
        s3_proxy.resume()
        print(f"[s3 outage] S3 back after {len(during)} events")
        await wait_until(
            bus,
            campaign_complete(cast.run_ids),
            timeout=150,
            services=services,
            what="a complete campaign after the S3 outage",
        )
        # Proof the outage reached the services that seal and judge, not just the proxy.
        refused = {
            n: services.log_text(n).count("Connection refused")
            for n in ("sandbox-manager", "judge", "rules")
        }
        failed = {
            n: services.log_text(n).count("failed: StoreError")
            for n in ("sandbox-manager", "judge", "rules")
        }
        print(
            f"[s3 outage] refused connections logged: {refused}; handler attempts failed by StoreError: {failed}"
        )
        assert sum(refused.values()) > 0
    await check_against_baseline(bus, base, label="s3 outage")


@pytest.mark.slow
async def test_provider_429_storms_and_timeouts(
    bus: Bus, settings: Settings, cast: Cast, base: Baseline
) -> None:
    from assay.store import open_store

    # At most 5 faults per model: even if one request meets all of them in a row, the
    # providers' retry policy (6 attempts) still gets an answer.
    storm = [Fault.rate_limit(0.2), Fault.rate_limit(), Fault.rate_limit(1, http_date=True)]
    timeout = Fault.timeout(hold_s=cast.judge.timeout_s + 1)
    injected = {
        "m-careful": [*storm, timeout, Fault.rate_limit(0.1)],
        "m-overclaimer": [timeout, *storm, Fault.rate_limit(0.1)],
        "m-judge": [*storm, timeout],
    }
    for model, faults in injected.items():
        cast.server.inject(model, faults)
    cast.server.clear_requests()
    async with ServiceSet.running(settings, cast) as services:
        await cast.submit(bus, open_store(settings))
        await wait_until(
            bus,
            campaign_complete(cast.run_ids),
            timeout=150,
            services=services,
            what="a complete campaign through 429 storms and timeouts",
        )
    served = Counter(r.fault for r in cast.server.requests() if r.fault)
    print(f"\n[provider faults] injected faults served: {dict(served)}")
    assert served == Counter(f.kind for faults in injected.values() for f in faults), (
        "every fault met a request"
    )
    await check_against_baseline(bus, base, label="provider faults")
