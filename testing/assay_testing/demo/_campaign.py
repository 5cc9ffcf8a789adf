"""A campaign turned into the scripted demo: every model the scripted model server."""

from __future__ import annotations

from assay_schemas import CampaignSpec

SCRIPTED_KEY_ENV = "ASSAY_SCRIPTED_API_KEY"
"""The API key variable every scripted agent and judge names (any value will do)."""


def scripted_campaign(spec: CampaignSpec, base_url: str) -> CampaignSpec:
    """The campaign with every model pointed at the scripted server (recorded as such)."""
    agents = [
        a.model_copy(update={"base_url": base_url, "api_key_env": SCRIPTED_KEY_ENV})
        for a in spec.agents
    ]
    judges = [
        j.model_copy(update={"base_url": base_url, "api_key_env": SCRIPTED_KEY_ENV})
        for j in spec.judges
    ]
    return spec.model_copy(update={"agents": agents, "judges": judges, "scripted": True})
