"""The judge services: one durable consumer per judge id, plus the rule judge.

Each judge consumes `ArtifactsSealed` on its own durable `judge-<judge_id>` with
deliver-all, so a judge started late back-fills every sealed run on the log while new
runs keep flowing, and several instances of one judge share its work.
"""

from __future__ import annotations

from assay.bus import Bus
from assay.config import Settings
from assay.providers import provider_for
from assay.store import BlobStore, open_store
from assay_schemas import RULES_JUDGE_ID, ArtifactsSealed, ConfigError, JudgeSpec

from .context import CampaignScope
from .llm.handlers import JudgeService, ProviderFactory
from .rules.handlers import RulesService
from .spec import load_judge_spec

__all__ = ["SERVICE", "build", "build_rules", "durable_name"]

SERVICE = "judge"


def durable_name(judge_id: str) -> str:
    """The durable consumer of one judge."""
    return f"judge-{judge_id}"


def build(
    settings: Settings,
    judge: JudgeSpec | None = None,
    *,
    store: BlobStore | None = None,
    providers: ProviderFactory = provider_for,
    campaigns: CampaignScope = None,
) -> JudgeService:
    """A judge with its consumer registered (not started); see `CampaignScope` for `campaigns`.

    Without `judge`, the spec is read from `settings.judge_spec` (``ASSAY_JUDGE_SPEC``).
    """
    if judge is None:
        if settings.judge_spec is None:
            raise ConfigError(
                "the judge service needs a judge spec (--judge FILE or ASSAY_JUDGE_SPEC)"
            )
        judge = load_judge_spec(settings.judge_spec)
    bus = Bus(settings, service=f"{SERVICE}-{judge.judge_id}")
    service = JudgeService(
        bus=bus,
        store=store or open_store(settings),
        spec=judge,
        providers=providers,
        campaigns=campaigns,
    )
    bus.consume_event(
        ArtifactsSealed,
        service.on_sealed,
        durable=durable_name(judge.judge_id),
        max_workers=judge.max_concurrency,
    )
    return service


def build_rules(
    settings: Settings,
    *,
    store: BlobStore | None = None,
    campaigns: CampaignScope = None,
    concurrency: int = 4,
) -> RulesService:
    """The rule judge with its consumer registered (not started); it checks every campaign."""
    bus = Bus(settings, service=f"{SERVICE}-{RULES_JUDGE_ID}")
    service = RulesService(
        bus=bus,
        store=store or open_store(settings),
        campaigns=campaigns,
        check_budget_s=settings.judge_check_budget_s,
    )
    bus.consume_event(
        ArtifactsSealed,
        service.on_sealed,
        durable=durable_name(RULES_JUDGE_ID),
        max_workers=concurrency,
    )
    return service
