"""Campaign progress for `assay watch` and `assay run`: the campaign's history
(`assay_schemas.CampaignHistory`), the one fold the report's problems section reads too."""

from __future__ import annotations

from assay.security.controls import ControlsKey, SealBroken
from assay_schemas import CampaignHistory, ControlDeclared, Event, VerdictKey

__all__ = ["Progress", "VerdictKey", "advance"]

Progress = CampaignHistory
"""What `assay watch` folds the log into, live."""


def advance(progress: Progress, event: Event, key: ControlsKey | None) -> None:
    """Fold one event in; a control declaration opened with `key` names its control agent
    and run (one that does not open is counted, as by a reader without the key)."""
    progress.apply(event)
    if isinstance(event, ControlDeclared) and key is not None:
        try:
            d = key.open(event)
        except SealBroken:
            return  # the aggregator lists it with the refused messages
        progress.declare_control(d.campaign_id, d.task_id, d.agent_id, d.control_run_id)
