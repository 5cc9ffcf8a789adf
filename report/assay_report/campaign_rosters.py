"""The report's view of each campaign's spec: read from its `CampaignHistory` (the one fold
of a campaign), without the control agents the opened declarations name."""

from __future__ import annotations

from typing import Any, NamedTuple

from assay_schemas import CampaignHistory, CampaignSpec

__all__ = ["CampaignRosters"]


class _Roster(NamedTuple):
    """A campaign's entry, and what it was built from."""

    spec: CampaignSpec
    controls: int
    """Control agents the history knew (they only ever grow)."""
    data: dict[str, Any]


class CampaignRosters:
    """campaign_id → its spec as a JSON-mode dict, each built again only when its spec or
    its control agents change (the report reads it many times per event folded)."""

    def __init__(self) -> None:
        self._built: dict[str, _Roster] = {}

    def read(self, histories: dict[str, CampaignHistory]) -> dict[str, dict[str, Any]]:
        """Every campaign's entry as of `histories`."""
        out: dict[str, dict[str, Any]] = {}
        for campaign_id, history in histories.items():
            spec = history.campaigns.get(campaign_id)
            if spec is None:
                continue
            built = self._built.get(campaign_id)
            controls = len(history.control_agents)
            if built is None or built.spec is not spec or built.controls != controls:
                built = _Roster(spec, controls, _without_controls(history, spec))
                self._built[campaign_id] = built
            out[campaign_id] = built.data
        return out


def _without_controls(history: CampaignHistory, spec: CampaignSpec) -> dict[str, Any]:
    """The spec as JSON, without the control agents `history` knows (the roster lists them
    like agents for readers without the controls secret; for every report they are none)."""
    data = spec.model_dump(mode="json")
    controls = {a.split("/", 1)[1] for a in history.control_agents}
    if controls:
        data["agents"] = [a for a in data.get("agents", ()) if a.get("agent_id") not in controls]
    return data
