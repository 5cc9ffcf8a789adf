"""The one campaign lookup: the last valid CampaignStarted on the campaign's subject."""

from __future__ import annotations

from assay.bus import Bus, read_campaign
from assay.config import Settings
from assay_schemas import CampaignSpec, CampaignStarted
from assay_testing.pipeline import campaign, scripted_agent


def _spec(campaign_id: str, name: str) -> CampaignSpec:
    agent = scripted_agent("a", "m", "http://127.0.0.1:9/v1")
    return campaign(campaign_id, [agent], name=name)


async def _declare(bus: Bus, spec: CampaignSpec) -> None:
    await bus.publish(
        CampaignStarted(
            event_id=CampaignStarted.id_for(spec.campaign_id, spec.name),
            campaign_id=spec.campaign_id,
            campaign=spec,
            producer=bus.producer,
        )
    )


async def test_an_undeclared_campaign_is_none(bus: Bus) -> None:
    await _declare(bus, _spec("other", "other"))
    assert await read_campaign(bus, "c1") is None


async def test_the_last_declaration_wins_and_garbage_on_the_subject_is_skipped(
    bus: Bus, settings: Settings
) -> None:
    first = _spec("c1", "first")
    await _declare(bus, first)
    assert await read_campaign(bus, "c1") == first
    await _declare(bus, _spec("c1", "second"))
    subject = bus.subjects.event("CampaignStarted", "c1", "-")
    await bus.broker.publish(b"\xff not json", subject, stream=settings.stream)
    await bus.broker.publish(b'{"event_type": "CampaignStarted"}', subject, stream=settings.stream)
    found = await read_campaign(bus, "c1")
    assert found is not None and found.name == "second"


async def test_the_answer_is_kept_until_the_subject_changes(bus: Bus) -> None:
    """A second read with nothing new stored is the kept answer; a new declaration is seen."""
    await _declare(bus, _spec("c1", "first"))
    found = await read_campaign(bus, "c1")
    assert found is not None and await read_campaign(bus, "c1") is found
    await _declare(bus, _spec("c1", "third"))
    again = await read_campaign(bus, "c1")
    assert again is not None and again.name == "third"
    assert await read_campaign(bus, "c1") is again
