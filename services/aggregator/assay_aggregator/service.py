"""The aggregator service, built from its contract and settings: one durable consumer
(``aggregator``, over every event) feeding `AggregatorService` (see `handlers`)."""

from __future__ import annotations

from assay.bus import Bus, subscribe
from assay.config import Settings
from assay.security.signing import trust_for
from assay.store import BlobStore, open_store
from assay_report.statistics import DEFAULT_RESAMPLES

from .contract import CONTRACT, EVERYTHING
from .handlers import AggregatorService

__all__ = ["DURABLE", "SERVICE", "AggregatorService", "build"]

SERVICE = CONTRACT.service
PULL_BATCH = 256
BATCH_WAIT_S = 0.25
"""How long one pull waits on a quiet log (a busy one answers at once): what the fold
may lag a lone event by."""
BATCH_GATHER_S = 0.05
"""After a pull that drained the log, how long the next one waits for events to gather:
a live campaign's events then come 10-20 to a pull instead of 1-2 (each pull a request and
a "no messages" answer through nats-server), at most this much later."""
DURABLE = EVERYTHING.durable


def build(
    settings: Settings,
    *,
    store: BlobStore | None = None,
    write_report: bool = True,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> AggregatorService:
    """An aggregator with its durable consumer registered (not started); of the blobs it
    reads only seal manifests too large to inline, from `store` (default: the configured
    one, as `rebuild.blob_loader` and `replay --verify` read them)."""
    bus = Bus(settings, service=SERVICE)
    service = AggregatorService(
        bus=bus,
        settings=settings,
        write_report=write_report,
        n_resamples=n_resamples,
        trust=trust_for(settings),
        store=store or open_store(settings),
    )
    # One worker: events are folded in log order, and the fold is cheap; pulled and handed
    # over in batches, so that a busy log costs one fetch per batch and no faststream
    # delivery per event (each event is still parsed, counted and acked on its own).
    subscribe(
        bus,
        EVERYTHING,
        service.on_event,
        max_workers=1,
        batch_size=PULL_BATCH,
        batch_wait_s=BATCH_WAIT_S,
        batch_gather_s=BATCH_GATHER_S,
        on_refused=service.on_refused,
    )
    return service
