"""The judges' contracts: the named judges, the rule judge and the jury, all connecting
as the `judge` role (see `assay.contract`)."""

from __future__ import annotations

from assay.contract import Consumer, ServiceContract
from assay_schemas import (
    RULES_JUDGE_ID,
    ArtifactsSealed,
    CampaignStarted,
    JudgeRegistered,
    JudgmentFailed,
    JudgmentRecorded,
)

__all__ = ["CONTRACT", "JURY", "JURY_CAMPAIGNS", "RULES", "RULES_SEALED", "SEALED"]

_VERDICTS = (JudgeRegistered, JudgmentRecorded, JudgmentFailed)

SEALED = Consumer("judge-{judge_id}", ArtifactsSealed)
"""One durable per judge id, deliver-all: a judge started late back-fills every sealed
run, and instances of one judge share its work."""
RULES_SEALED = Consumer(f"judge-{RULES_JUDGE_ID}", ArtifactsSealed)
JURY_CAMPAIGNS = Consumer("jury-{instance}", CampaignStarted)

CONTRACT = ServiceContract(service="judge", role="judge", consumes=(SEALED,), publishes=_VERDICTS)
RULES = ServiceContract(
    service="rules", role="judge", consumes=(RULES_SEALED,), publishes=_VERDICTS
)
JURY = ServiceContract(service="jury", role="judge", consumes=(JURY_CAMPAIGNS,))
"""The jury only starts judges (each a `CONTRACT` service in this process)."""
