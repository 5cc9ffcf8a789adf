"""The judge services, each built from its contract and settings: one durable consumer per
judge id, the rule judge, and the jury that starts the judges a campaign names.

Each judge consumes `ArtifactsSealed` on its own durable `judge-<judge_id>` with
deliver-all, and at start back-fills from the log every sealed run of the campaigns it is
enabled for that lacks its verdict, so a judge started late judges them all while new runs
keep flowing; several instances of one judge share the durable's work.
"""

from __future__ import annotations

import re

from assay.bus import Bus, subscribe
from assay.config import Settings
from assay.contract import fill
from assay.providers import provider_for
from assay.store import BlobStore, open_store
from assay_schemas import ID_PATTERN, RULES_JUDGE_ID, ConfigError, JudgeSpec, safe_token

from .context import ALL_CAMPAIGNS, CampaignScope
from .contract import CONTRACT, JURY, JURY_CAMPAIGNS, RULES_SEALED, SEALED
from .handlers import JudgeService, JurySupervisor, ProviderFactory, RulesService
from .settings import JudgeSettings
from .spec import load_judge_spec

__all__ = ["SERVICE", "build", "build_jury", "build_rules", "durable_name", "judge_scope"]

SERVICE = CONTRACT.service


def judge_scope(campaigns: list[str]) -> CampaignScope:
    """The scope of a judge started alone: the named campaigns, or every campaign."""
    for campaign_id in campaigns:
        if not re.fullmatch(ID_PATTERN, campaign_id):
            raise ConfigError(
                f"--campaign {campaign_id!r} (ASSAY_JUDGE_CAMPAIGNS) is not a campaign id: "
                "letters, digits, '_' and '-', at most 128"
            )
    return set(campaigns) if campaigns else ALL_CAMPAIGNS


def durable_name(judge_id: str) -> str:
    """The durable consumer of one judge."""
    return fill(SEALED.durable, {"judge_id": judge_id})


def build(
    settings: Settings,
    judge: JudgeSpec | None = None,
    *,
    store: BlobStore | None = None,
    providers: ProviderFactory = provider_for,
    campaigns: CampaignScope = None,
) -> JudgeService:
    """A judge with its consumer registered (not started); see `CampaignScope` for `campaigns`.

    Without `judge` (the judge service alone: `assay serve judge`, `assay-judge`), the spec
    is read from `JudgeSettings.judge_spec` (``ASSAY_JUDGE_SPEC``) and the scope from
    `JudgeSettings.judge_campaigns` (``--campaign``; none: every campaign).
    """
    if judge is None:
        own = JudgeSettings.of(settings)
        if own.judge_spec is None:
            raise ConfigError(
                "the judge service needs a judge spec (--judge FILE or ASSAY_JUDGE_SPEC)"
            )
        judge = load_judge_spec(own.judge_spec)
        campaigns = judge_scope(own.judge_campaigns)
    bus = Bus(settings, service=f"{SERVICE}-{judge.judge_id}")
    service = JudgeService(
        bus=bus,
        store=store or open_store(settings),
        spec=judge,
        providers=providers,
        campaigns=campaigns,
        model_cache_dir=JudgeSettings.of(settings).model_cache,
    )
    mine = {"judge_id": judge.judge_id}
    subscribe(
        bus,
        SEALED,
        service.on_sealed,
        mine,
        max_workers=judge.max_concurrency,
        on_give_up=service.on_given_up,
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
        check_budget_s=JudgeSettings.of(settings).judge_check_budget_s,
    )
    subscribe(
        bus,
        RULES_SEALED,
        service.on_sealed,
        max_workers=concurrency,
        on_give_up=service.on_given_up,
    )
    return service


def _judge_of(settings: Settings, spec: JudgeSpec, store: BlobStore) -> JudgeService:
    return build(settings, spec, store=store)


def build_jury(settings: Settings, *, store: BlobStore | None = None) -> JurySupervisor:
    """The jury with its `CampaignStarted` consumer registered (not started)."""
    bus = Bus(settings, service=JURY.service)
    jury = JurySupervisor(
        settings=settings, store=store or open_store(settings), bus=bus, build_judge=_judge_of
    )
    mine = {"instance": safe_token(settings.instance)}
    subscribe(bus, JURY_CAMPAIGNS, jury.on_campaign, mine)
    return jury
