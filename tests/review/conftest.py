"""Human review fixtures: a signed synthetic campaign, an enrolled reviewer, a foreign one,
the review desk and the viewer in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.security.signing import Signer, ensure_operator, signer_for, trust_for
from assay.store import LocalBlobStore
from assay_aggregator.rebuild import fold_stream
from assay_report.projections import Projections
from assay_schemas import ArtifactsSealed, Event, JudgmentRecorded
from assay_testing.synthetic_log import clean_log, publish_events, synthetic_events
from assay_viewer import Source, create_app
from assay_viewer.grading import Grade, human_verdict
from assay_viewer.review import ReviewDesk

SPEC = clean_log(n_tasks=6, n_agents=2, n_samples=1, seed=5)


class Signed(NamedTuple):
    """A signed campaign on the log: its events, its sealed run ids, its blob store."""

    events: list[Event]
    sealed: list[str]
    store: LocalBlobStore


PAYLOAD = (
    "<script>document.title='PWNED'</script><img src=x onerror=\"document.body.dataset.pwned='1'\">"
)
"""Agent-written markup in every final message: a review page shows it as text."""


def _hostile(e: Event) -> Event:
    if isinstance(e, ArtifactsSealed):
        return e.model_copy(update={"final_message": f"{PAYLOAD} {e.final_message}"})
    return e


@pytest.fixture
async def signed(bus: Bus, settings: Settings) -> Signed:
    """SPEC published with every event signed by the service that writes it (each final
    message led by agent-written markup)."""
    ensure_operator(settings)
    store = LocalBlobStore(settings.blob_dir)
    events = [_hostile(e) for e in synthetic_events(SPEC, store=store)]
    await publish_events(
        bus.js, bus.subjects, bus.stream.name, events, signers=partial(signer_for, settings)
    )
    sealed = sorted({e.run_id or "" for e in events if isinstance(e, ArtifactsSealed)})
    return Signed(events, sealed, store)


async def projections(bus: Bus, settings: Settings) -> Projections:
    """A fresh fold of the whole log, signatures checked as every reader checks them."""
    state = await fold_stream(
        bus.js, bus.stream.name, bus.subjects.events, trust=trust_for(settings)
    )
    return Projections(state)


def enroll(settings: Settings, name: str) -> Signer:
    """`assay keys enroll reviewer-<name>` in this home."""
    signer = signer_for(settings, f"reviewer-{name}", enroll=True)
    assert signer is not None
    return signer


def foreign_reviewer(settings: Settings, tmp: Path, name: str) -> None:
    """A reviewer key enrolled by another home's operator, copied into this home's keys."""
    other = settings.model_copy(update={"home": tmp / "other-home"})
    ensure_operator(other)
    enroll(other, name)
    for suffix in (".seed", ".enrollment"):
        src = other.home / "keys" / f"reviewer-{name}{suffix}"
        (settings.home / "keys" / src.name).write_bytes(src.read_bytes())


def rubric_scores(p: Projections, score: int) -> dict[str, int]:
    """Every dimension of the campaign's rubric, scored `score`."""
    dims = p.state.campaigns["camp"]["rubric"]["dimensions"]
    return {d["key"]: score for d in dims}


def verdict(p: Projections, reviewer: str, run_id: str, score: int) -> JudgmentRecorded:
    """A well-formed human verdict of `reviewer` (a judge id) on a run."""
    grade = Grade(run_id=run_id, scores=rubric_scores(p, score), note="checked by hand")
    return human_verdict(p, reviewer, grade, service=reviewer)


BASE = "http://127.0.0.1"
"""Where the in-process clients say they talk to."""


@pytest.fixture
async def desk(settings: Settings, signed: Signed) -> ReviewDesk:
    """Alice's review desk, enrolled in this home, over the signed campaign."""
    enroll(settings, "alice")
    return ReviewDesk(settings, "alice")


@pytest.fixture
async def review(settings: Settings, desk: ReviewDesk) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the viewer with Alice's review desk."""
    source = Source(settings, resamples=200)
    transport = httpx.ASGITransport(app=create_app(source, review=desk))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        yield c
    await source.close()


@pytest.fixture
async def viewer(settings: Settings, signed: Signed) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the viewer alone (no review desk) over the signed campaign."""
    source = Source(settings, resamples=200)
    transport = httpx.ASGITransport(app=create_app(source))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        yield c
    await source.close()
