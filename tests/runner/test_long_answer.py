"""Attack (issue #24): a model agent whose final text is huge. Over FINAL_MESSAGE_INLINE_CHARS
the answer is inlined as its start and stored whole as a blob, and the run is judged; a turn
too large for any event, or an answer the store refuses, ends the run saying so (never as a
runner restart)."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.store import BlobInfo, LocalBlobStore
from assay_aggregator.audit import audit_run, load_run_events
from assay_judge import build_rules
from assay_schemas import (
    FINAL_MESSAGE_INLINE_CHARS,
    MAX_EVENT_BYTES,
    AgentFinished,
    ArtifactsSealed,
    Event,
    JudgmentFailed,
    JudgmentRecorded,
    RunFailed,
)
from assay_testing import pipeline
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply

pytestmark = pytest.mark.timeout(180)

LONG = "The answer, at length. " + "B" * 600_000 + " The end: é."
"""Fits one step event, not the inline part of AgentFinished."""
HUGE = "C" * 10_000_000
"""Fits no event at all."""


@pytest.fixture
def scripted() -> Iterator[ScriptedModelServer]:
    scripts = {
        "says": ScriptedSequence([ScriptReply.say(LONG)]),
        "submits": ScriptedSequence([ScriptReply.call("submit", {"answer": LONG})]),
        "floods": ScriptedSequence([ScriptReply.say(HUGE)]),
    }
    with pipeline.scripted_server(scripts) as server:
        yield server


class FullDisk(LocalBlobStore):
    """A real store whose disk fills up: blobs over 100 kB are refused as by ENOSPC."""

    def put_bytes(self, data: bytes) -> BlobInfo:
        if len(data) > 100_000:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().put_bytes(data)


def _ended(events: list[Event]) -> bool:
    return any(isinstance(e, JudgmentRecorded | JudgmentFailed | RunFailed) for e in events)


async def _run(
    bus: Bus,
    settings: Settings,
    store: LocalBlobStore,
    tmp_path: Path,
    url: str,
    model: str,
    judge_store: LocalBlobStore | None = None,
) -> list[Event]:
    folder = pipeline.write_task(tmp_path / "t", "t1", "Say a lot.", {"a.csv": "x\n1\n"})
    spec = pipeline.campaign("c1", [pipeline.scripted_agent("a1", model, url)])
    async with pipeline.services(settings, store):
        rules = build_rules(settings, store=judge_store or store)
        await rules.start()
        try:
            await pipeline.submit_folder(bus, store, spec, folder, max_bytes=10_000)
            await pipeline.wait_for_events(bus, _ended, timeout=90)
            # the seal follows a failure too: wait for it before the sandbox goes
            return await pipeline.wait_for_events(
                bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs)
            )
        finally:
            await rules.stop()


@pytest.mark.parametrize("model", ["says", "submits"])
async def test_a_long_model_answer_is_judged_whole_from_its_blob(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer, model: str
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    events = await _run(bus, settings, store, tmp_path, scripted.openai_base_url, model)
    assert not [e for e in events if isinstance(e, RunFailed)]
    [finished] = [e for e in events if isinstance(e, AgentFinished)]
    [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
    for event in (finished, sealed):
        assert len(event.model_dump_json().encode()) <= MAX_EVENT_BYTES
        assert event.final_message == LONG[:FINAL_MESSAGE_INLINE_CHARS]
        assert event.final_message_truncated and event.final_message_blob is not None
        assert store.get_bytes(event.final_message_blob.sha256).decode() == LONG
    [judged] = [e for e in events if isinstance(e, JudgmentRecorded)]
    assert judged.judge_id == "rules" and judged.run_id == finished.run_id
    # The audit re-verifies the answer's blob like every other blob the run references.
    ref = finished.final_message_blob
    assert ref is not None
    logged, _ = await load_run_events(bus, finished.run_id or "")
    checks = [b for b in audit_run(logged, store).blobs if b.role == "final_message"]
    assert [(b.sha256, b.status) for b in checks] == [(ref.sha256, "ok")] * 2
    path = store.path_of(ref.sha256)
    path.chmod(0o644)
    path.write_bytes(b"tampered")
    checks = [b for b in audit_run(logged, store).blobs if b.role == "final_message"]
    assert {b.status for b in checks} == {"corrupted"}


async def _failed(
    bus: Bus,
    settings: Settings,
    store: LocalBlobStore,
    tmp_path: Path,
    scripted: ScriptedModelServer,
    model: str,
) -> tuple[RunFailed, list[Event]]:
    """The run of `model`'s agent, which must end in one RunFailed; that and the log."""
    events = await _run(bus, settings, store, tmp_path, scripted.openai_base_url, model)
    [failed] = [e for e in events if isinstance(e, RunFailed)]
    return failed, events


async def test_a_model_turn_larger_than_any_event_fails_the_run_saying_so(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    failed, events = await _failed(bus, settings, store, tmp_path, scripted, "floods")
    assert failed.stage == "agent" and not failed.infrastructure  # the agent's own output
    assert f"over the {MAX_EVENT_BYTES} byte limit" in failed.error, failed.error
    assert "restarted" not in failed.error
    [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
    assert sealed.outcome == "failed"


async def test_an_answer_the_store_refuses_fails_the_run_saying_so(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    store = FullDisk(settings.blob_dir)
    failed, events = await _failed(bus, settings, store, tmp_path, scripted, "says")
    assert failed.stage == "agent" and failed.infrastructure  # the platform's failure
    assert "final answer" in failed.error and "could not be stored" in failed.error
    assert "No space left" in failed.error
    assert not [e for e in events if isinstance(e, AgentFinished | JudgmentRecorded)]


async def test_a_lost_answer_blob_fails_the_judgment_saying_so(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    lost = LocalBlobStore(tmp_path / "elsewhere")  # the judge's store never got the answer
    events = await _run(bus, settings, store, tmp_path, scripted.openai_base_url, "says", lost)
    [failed] = [e for e in events if isinstance(e, JudgmentFailed)]
    assert failed.judge_id == "rules" and failed.infrastructure
    assert "the final answer cannot be read" in failed.error, failed.error
    assert not [e for e in events if isinstance(e, JudgmentRecorded)]
