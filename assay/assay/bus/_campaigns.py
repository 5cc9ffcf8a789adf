"""The campaign a CampaignStarted declared, read back from the log by every service."""

from __future__ import annotations

from nats.js.errors import NotFoundError

from assay_schemas import NO_RUN, CampaignSpec, CampaignStarted

from ._bus import Bus

__all__ = ["read_campaign"]


async def read_campaign(bus: Bus, campaign_id: str) -> CampaignSpec | None:
    """The campaign's spec, or None when it was never declared on the log.

    Read from the last CampaignStarted on the campaign's subject, as the aggregator's fold
    keeps it, so every reader sees the same spec; a replay (not a direct lookup) skips a
    message that is not a valid event, as every other reader of the log does.

    The runner asks once per task: the answer is kept with the sequence of the subject's
    last message, and read again only when a message was stored there since (one lookup).
    """
    subject = bus.subjects.event(CampaignStarted.__name__, campaign_id, NO_RUN)
    try:
        last = (await bus.js.get_last_msg(bus.stream.name, subject)).seq or 0
    except NotFoundError:
        return None
    known = bus.campaigns.get(subject)
    if known is not None and known[0] == last:
        return known[1]
    spec: CampaignSpec | None = None
    async for logged in bus.replay(subject=subject, lookups=2):
        if logged.sequence > last:
            break  # stored after the lookup: the next call reads it
        if isinstance(logged.event, CampaignStarted):
            spec = logged.event.campaign
    bus.campaigns[subject] = (last, spec)
    return spec
