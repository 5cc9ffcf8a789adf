"""The viewer's own contract: the review desk writes reviewers' verdicts and nothing else,
as the reviewer, over the cli's connection; the aggregator's contract still writes none."""

from __future__ import annotations

import pytest

from assay.contract import service_contracts
from assay.security.permissions import events_by_role, role_permissions
from assay_schemas import ArtifactsSealed
from assay_viewer.contract import CONTRACT, NotTheViewers, check_publishes, reviewer_signer


def test_the_viewer_publishes_what_a_reviewer_may_sign() -> None:
    assert CONTRACT.published_types == events_by_role()["reviewer"]


def test_the_cli_connection_may_publish_the_viewers_events() -> None:
    allowed = role_permissions("cli", stream="ASSAY", prefix="assay").publish
    for name in CONTRACT.published_types:
        assert f"assay.ev.{name}.*.*" in allowed, name


def test_the_aggregator_writes_only_stops_and_the_viewer_is_no_served_service() -> None:
    """The aggregator logs no verdict (the review desk's are the viewer's): only the stop
    its fold decided for a campaign with ``stopping:`` (#51)."""
    contracts = service_contracts()
    assert contracts["aggregator"].published_types == ("CampaignStopped",)
    assert "viewer" not in contracts


def test_the_viewer_refuses_to_publish_another_event() -> None:
    sealed = ArtifactsSealed.model_construct()
    with pytest.raises(NotTheViewers):
        check_publishes([sealed])


def test_only_a_reviewer_signs_the_desks_verdicts() -> None:
    assert reviewer_signer("reviewer-alice") == "reviewer-alice"
    with pytest.raises(ValueError, match="no reviewer"):
        reviewer_signer("aggregator")
