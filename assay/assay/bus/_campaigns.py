"""The campaign a CampaignStarted declared, read back from the log by every service."""

from __future__ import annotations

from assay_schemas import NO_RUN, CampaignSpec, CampaignStarted

from ._bus import Bus

__all__ = ["read_campaign"]


async def read_campaign(bus: Bus, campaign_id: str) -> CampaignSpec | None:
    """The campaign's spec, or None when it was never declared on the log.

    Read from the last CampaignStarted on the campaign's subject, as the aggregator's fold
    keeps it, so every reader sees the same spec; a replay (not a direct lookup) skips a
    message that is not a valid event, as every other reader of the log does."""
    spec: CampaignSpec | None = None
    subject = bus.subjects.event(CampaignStarted.__name__, campaign_id, NO_RUN)
    async for logged in bus.replay(subject=subject, lookups=2):
        if isinstance(logged.event, CampaignStarted):
            spec = logged.event.campaign
    return spec
