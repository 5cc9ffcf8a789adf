"""How judges read a final answer that the events hold only the start of (issue #24): the
whole from its blob, bounded, and never the inline prefix in its place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.store import LocalBlobStore
from assay_judge.answer import final_answer
from assay_judge.files import SealedFiles
from assay_judge.llm.prompts import FINAL_MESSAGE_CHARS, case_prompt
from assay_schemas import (
    ArtifactsSealed,
    BlobNotFound,
    FileRef,
    JudgmentFailed,
    Producer,
    Task,
    default_rubric,
)
from assay_testing.scripted import ScriptedSequence, ScriptReply

from .cases import Judging, judgments, of_type, verdict

pytestmark = pytest.mark.timeout(60)


def _sealed(inline: str, blob: FileRef | None) -> ArtifactsSealed:
    return ArtifactsSealed(
        event_id=ArtifactsSealed.id_for("r1"),
        campaign_id="c1",
        run_id="r1",
        producer=Producer(service="test", version="0"),
        files=[],
        final_message=inline,
        final_message_truncated=blob is not None,
        final_message_blob=blob,
        agent_id="a1",
        epoch=0,
    )


def _put(store: LocalBlobStore, text: str) -> FileRef:
    info = store.put_bytes(text.encode())
    return FileRef(path="final-message.txt", sha256=info.sha256, size=info.size)


async def test_the_whole_answer_comes_from_the_blob_bounded(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    whole = "start " + "é" * 1000 + " end"
    sealed = _sealed(whole[:10], _put(store, whole))
    assert await final_answer(sealed, store, 10_000) == whole
    # Bounded by characters, whatever their bytes: no half character at the cut.
    assert await final_answer(sealed, store, 20) == whole[:20]


async def test_an_inline_answer_is_read_as_it_is(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    assert await final_answer(_sealed("short", None), store, 100) == "short"
    assert await final_answer(_sealed("short", None), store, 3) == "sho"


async def test_a_missing_answer_blob_is_an_error_not_the_prefix(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    ref = FileRef(path="final-message.txt", sha256="0" * 64, size=5)
    with pytest.raises(BlobNotFound):
        await final_answer(_sealed("start", ref), store, 100)


def test_the_llm_judge_is_told_how_long_the_whole_answer_is(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    files = SealedFiles(files=[], store=store)
    shown = "A" * FINAL_MESSAGE_CHARS
    prompt = case_prompt(Task(task_id="t", prompt="p"), shown, files, default_rubric(), 10**7)
    assert f"(truncated: {10**7} bytes, the first {FINAL_MESSAGE_CHARS} characters shown)" in prompt
    assert "truncated" not in case_prompt(
        Task(task_id="t", prompt="p"), "ok", files, default_rubric()
    )


async def test_the_llm_judge_sees_the_start_of_the_whole_answer_and_its_size(
    judging: Judging,
) -> None:
    model = judging.scripted(ScriptedSequence([ScriptReply.call("submit_verdict", verdict())]))
    whole = "B" * 40_000 + "C" * 60_000  # the inline start holds no C
    ref = _put(judging.store, whole)
    await judging.one_run(
        [judging.spec("j1", model)],
        lambda evs: len(judgments(evs)) == 1,
        files={"o.txt": b"x"},
        final_message=whole[:100],
        final_message_blob=ref,
    )
    [request] = judging.server.requests(model)
    prompt = json.dumps(request.body)
    shown = whole[:FINAL_MESSAGE_CHARS]
    assert shown in prompt and whole[: FINAL_MESSAGE_CHARS + 1] not in prompt
    assert f"(truncated: {ref.size} bytes, the first {FINAL_MESSAGE_CHARS} characters" in prompt


async def test_the_llm_judge_fails_saying_so_when_the_answer_blob_is_lost(
    judging: Judging,
) -> None:
    model = judging.scripted(ScriptedSequence([ScriptReply.call("submit_verdict", verdict())]))
    lost = FileRef(path="final-message.txt", sha256="1" * 64, size=10)
    events, _ = await judging.one_run(
        [judging.spec("j1", model)],
        lambda evs: bool(of_type(evs, JudgmentFailed)),
        files={"o.txt": b"x"},
        final_message="the start",
        final_message_blob=lost,
    )
    [failed] = of_type(events, JudgmentFailed)
    assert failed.infrastructure and "the final answer cannot be read" in failed.error
    assert not judging.server.requests(model)  # no judging of the start alone
