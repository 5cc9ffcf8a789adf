"""`assay rejudge`: a new judge back-fills every sealed run; the report then shows it."""

from __future__ import annotations

import inspect
from typing import Any

from assay.bus import Bus, Delivery
from assay.config import Settings
from assay_aggregator.rebuild import fold_stream
from assay_judge.rejudge import rejudge
from assay_report import Projections, build_report
from assay_schemas import (
    ArtifactsSealed,
    JudgeRegistered,
    JudgeSpec,
)
from assay_testing.events import judgment_recorded
from tests.aggregator.conftest import Published, published  # noqa: F401 (fixture)

NEW = JudgeSpec(judge_id="judge_new", model="model-new", family="fam_new")


class FakeJudge:
    """Stands in for the judge service: a durable deliver-all consumer of ArtifactsSealed."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def start(self) -> None:
        bus = self.bus
        await bus.connect()
        await bus.publish(
            JudgeRegistered(
                event_id=JudgeRegistered.id_for("camp", NEW.judge_id),
                campaign_id="camp",
                judge=NEW,
                producer=bus.producer,
            )
        )
        await bus.start()

    async def stop(self) -> None:
        await self.bus.stop()


class FakeJudgeBuilder:
    """Builds `FakeJudge`s and remembers the scope it was asked for."""

    def __init__(self) -> None:
        self.scope: Any = None

    def __call__(self, settings: Settings, judge: JudgeSpec, *, campaigns: Any = None) -> FakeJudge:
        self.scope = campaigns
        bus = Bus(settings, service=f"judge-{judge.judge_id}")

        async def on_sealed(event: ArtifactsSealed, delivery: Delivery) -> None:
            await bus.publish(
                judgment_recorded(
                    event,
                    judge.judge_id,
                    9,
                    family=judge.family,
                    model=judge.model,
                    producer=bus.producer,
                )
            )

        bus.consume(
            bus.subjects.event("ArtifactsSealed"),
            on_sealed,
            durable="judge-judge_new",
            event_type=ArtifactsSealed,
            max_workers=4,
        )
        return FakeJudge(bus)


async def test_rejudge_backfills_every_sealed_run(
    bus: Bus,
    settings: Settings,
    published: Published,  # noqa: F811
) -> None:
    app = FakeJudgeBuilder()
    seen: list[tuple[int, int]] = []
    result = await rejudge(
        settings,
        NEW,
        campaign="camp",
        build_judge=app,
        timeout_s=30,
        poll_s=0.1,
        on_progress=lambda done, total: seen.append((done, total)),
    )
    sealed = sum(isinstance(e, ArtifactsSealed) for e in published.events)
    assert result.complete and result.n_done == result.n_sealed == sealed
    assert app.scope == {"camp"} and seen[-1] == (sealed, sealed)
    p = Projections(await fold_stream(bus.js, bus.stream.name, bus.subjects.events))
    report = build_report(p, n_resamples=100)
    judges = {j.judge_id: j for j in report.judges}
    assert judges["judge_new"].n_runs == sealed and judges["judge_new"].family == "fam_new"
    # A rejudge is a judge the campaign did not name: beside the declared jury's headline.
    [late] = report.late_judges
    assert (late.judge_id, late.n_runs, late.n_backfilled) == ("judge_new", sealed, sealed)
    headline = {r.judge_id for r in report.statistics.below_anchor_shares}
    assert headline >= {"judge_a", "judge_b"} and "judge_new" not in headline
    assert report.with_late_judges is not None
    assert {r.judge_id for r in report.with_late_judges.below_anchor_shares} >= {
        "judge_a",
        "judge_b",
        "judge_new",
    }


def test_the_judge_service_has_the_api_rejudge_uses() -> None:
    from assay_judge import ALL_CAMPAIGNS, JudgeService, build

    assert "campaigns" in inspect.signature(build).parameters
    assert callable(JudgeService.start) and callable(JudgeService.stop)
    assert frozenset({"*"}) == ALL_CAMPAIGNS
