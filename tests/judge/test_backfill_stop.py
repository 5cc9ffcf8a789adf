"""A judge stopping mid back-fill gives up no run, whatever error its cancellation became."""

from __future__ import annotations

import asyncio

import pytest

from assay_judge.backfill import _with_retries
from assay_schemas import ArtifactsSealed, Producer

pytestmark = pytest.mark.timeout(20)


def _sealed(run_id: str) -> ArtifactsSealed:
    return ArtifactsSealed(
        event_id=ArtifactsSealed.id_for(run_id),
        campaign_id="c1",
        run_id=run_id,
        producer=Producer(service="test", version="0"),
        files=[],
        final_message="done",
        agent_id="a1",
        epoch=0,
    )


class _Judge:
    """Judges by waiting on the bus, which turns the wait's cancellation into a timeout, as
    nats-py's request does when the closing connection cancels its future."""

    judge_id = "j"

    def __init__(self) -> None:
        self.attempts = 0
        self.waiting = asyncio.Event()
        self.given_up: list[str] = []

    async def judge_sealed(self, sealed: ArtifactsSealed) -> None:
        self.attempts += 1
        self.waiting.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise TimeoutError("nats: timeout") from None

    async def give_up(self, sealed: ArtifactsSealed, error: Exception) -> None:
        self.given_up.append(sealed.run_id or "")


async def test_a_stopped_back_fill_neither_retries_nor_gives_up_a_run() -> None:
    judge = _Judge()
    sealed = _sealed("r1")
    work = asyncio.create_task(_with_retries(judge, sealed, attempts=1, retry_s=0.0))  # type: ignore[arg-type]
    await judge.waiting.wait()
    work.cancel()
    with pytest.raises(asyncio.CancelledError):
        await work
    assert judge.given_up == []
    assert judge.attempts == 1


async def test_a_run_whose_judging_fails_is_still_given_up_after_its_attempts() -> None:
    class _Failing(_Judge):
        async def judge_sealed(self, sealed: ArtifactsSealed) -> None:
            self.attempts += 1
            raise TimeoutError("nats: timeout")

    judge = _Failing()
    await _with_retries(judge, _sealed("r2"), attempts=3, retry_s=0.0)  # type: ignore[arg-type]
    assert judge.attempts == 3
    assert judge.given_up == ["r2"]
