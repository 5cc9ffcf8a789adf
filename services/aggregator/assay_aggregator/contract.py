"""The aggregator's contract: it reads every event and writes none (see `assay.contract`)."""

from __future__ import annotations

from assay.contract import Consumer, ServiceContract

__all__ = ["CONTRACT", "EVERYTHING"]

EVERYTHING = Consumer("aggregator", None)

CONTRACT = ServiceContract(service="aggregator", role="aggregator", consumes=(EVERYTHING,))
