"""The aggregator's contract: it reads every event and writes one, `CampaignStopped`, the
stopping rule's decision taken in its fold (see `assay.contract`)."""

from __future__ import annotations

from assay.contract import Consumer, ServiceContract
from assay_schemas import CampaignStopped, Event

__all__ = ["CONTRACT", "EVERYTHING"]

EVERYTHING = Consumer("aggregator", Event)
"""Every event, folded in log order."""

CONTRACT = ServiceContract(
    service="aggregator",
    role="aggregator",
    consumes=(EVERYTHING,),
    publishes=(CampaignStopped,),
)
