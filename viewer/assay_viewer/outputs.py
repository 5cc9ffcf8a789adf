"""What a judge said beyond its verdict: outputs it repaired, and the raw output of a failure.

`JudgmentRecorded.rejected_outputs` and `JudgmentFailed.raw_output` are blobs written
by the judge from a model's reply; the run page shows their first characters as escaped
text and links to the whole blob (served as a sandboxed text download).
"""

from __future__ import annotations

from typing import NamedTuple

from assay.store import BlobStore
from assay_schemas import AssayError, FileRef, RunHistory

__all__ = ["JudgeOutputs", "RawOutput", "judge_outputs"]

RAW_CHARS = 20_000
"""Characters of a raw output shown inline; the blob link holds the rest."""


class RawOutput(NamedTuple):
    """A judge output blob: its first characters, whether they were cut, or why unread."""

    ref: FileRef
    text: str
    truncated: bool
    error: str = ""


class Failure(NamedTuple):
    """A judgment that failed after its repairs."""

    judge_id: str
    sample: int
    error: str
    attempts: int
    infrastructure: bool
    raw: RawOutput | None


class JudgeOutputs(NamedTuple):
    """Per "judge#sample": attempts and rejected outputs of a recorded verdict; failures."""

    attempts: dict[str, int]
    rejected: dict[str, RawOutput]
    failures: list[Failure]


def _raw(store: BlobStore, ref: FileRef) -> RawOutput:
    try:
        data = store.get_bytes(ref.sha256)  # verified against its address
    except (AssayError, OSError) as e:
        return RawOutput(ref, "", False, f"{type(e).__name__}: {e}")
    text = data.decode("utf-8", errors="replace")
    return RawOutput(ref, text[:RAW_CHARS], len(text) > RAW_CHARS)


def judge_outputs(history: RunHistory, store: BlobStore) -> JudgeOutputs:
    """Repairs and raw outputs of every judge sample of one run, blobs read from `store`."""
    attempts: dict[str, int] = {}
    rejected: dict[str, RawOutput] = {}
    for key, e in sorted(history.verdicts.items()):
        name = f"{key.judge_id}#{key.sample}"
        attempts[name] = e.attempts
        if e.rejected_outputs is not None:
            rejected[name] = _raw(store, e.rejected_outputs)
    failures = [
        Failure(
            f.judge_id,
            f.sample,
            f.error,
            f.attempts,
            f.infrastructure,
            _raw(store, f.raw_output) if f.raw_output is not None else None,
        )
        for _, f in sorted(history.judgment_failures.items())
    ]
    return JudgeOutputs(attempts, rejected, failures)
