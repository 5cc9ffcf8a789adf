"""`assay audit RUN_ID`: one run's event chain, its blobs re-verified, its verdicts, its score.

``audit_run`` is a pure function of the run's events and the blob store: it lists the
chain in log order, re-hashes every blob the chain references (attachments, the
workspace, full tool outputs, web sources, sealed artifacts, raw judge outputs), shows each judge's
verdict with its evidence, and recomputes the run's contribution to the report (run
score as defined in the statistics definitions, pass/fail at the anchor, tags).
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from assay.bus import Bus, LoggedEvent, RawMessage, read_raw
from assay.security.chain import verify_history
from assay.security.controls import controls_key
from assay.security.signing import TrustList
from assay.store import BlobStore
from assay_report.state import State
from assay_schemas import (
    ANCHOR,
    RULES_JUDGE_ID,
    ArtifactsSealed,
    BlobCorrupted,
    BlobNotFound,
    Event,
    InvalidEvent,
    RunHistory,
    RunRequested,
    StoreError,
    is_reviewer_id,
    parse_event,
)

from .rebuild import fold_stream
from .snapshot import resume_state

__all__ = [
    "REFUSED",
    "BlobCheck",
    "ChainLine",
    "Contribution",
    "RunAudit",
    "VerdictView",
    "audit_document",
    "audit_run",
    "counted_until",
    "load_run_events",
]


class ChainLine(NamedTuple):
    """One event of the run's chain."""

    sequence: int
    occurred_at: str
    event_type: str
    summary: str
    signer: str = ""
    """Who signed it (`role/name (key…)`), `REFUSED: why`, or '' when not checked."""


class BlobCheck(NamedTuple):
    """One referenced blob and whether its bytes still match their address."""

    role: str
    """attachment, workspace, tool_output, web_text, web_body (a web source's text and
    bytes), artifact or judge_raw_output."""
    path: str
    sha256: str
    size: int
    status: str
    """ok, corrupted or missing."""
    detail: str


class VerdictView(NamedTuple):
    """One judge sample's verdict with its evidence."""

    judge_id: str
    sample: int
    family: str
    model: str
    scores: dict[str, int]
    judge_score: float
    """Mean of the sample's scores (NaN for the rule judge)."""
    tags: list[str]
    rationale: str
    files_opened: list[str]
    files_cited: list[str]
    cited_not_opened: list[str]
    opened_not_sealed: list[str]
    checks: list[tuple[str, bool, str]]
    attempts: int = 1
    """Outputs the judge produced for this verdict: 1 + the rejected ones it repaired."""
    rejected_outputs: str = ""
    """sha256 of the blob holding the rejected outputs ('' when none were kept)."""


class Contribution(NamedTuple):
    """What this run adds to the report."""

    scored: bool
    infrastructure_failure: bool
    judge_scores: dict[str, float]
    """Per LLM judge: mean of all its ratings of the run (samples × dimensions)."""
    run_score: float
    """Mean over judges of the judge scores (NaN when unscored)."""
    passed: bool | None
    """run_score ≥ anchor (None when unscored)."""
    anchor: int
    tags: dict[str, int]
    """Failure tag → number of verdicts carrying it (rule judge included)."""


class RunAudit(NamedTuple):
    """Everything `assay audit` prints about one run."""

    run_id: str
    campaign_id: str
    task_id: str
    agent_id: str
    chain: list[ChainLine]
    blobs: list[BlobCheck]
    verdicts: list[VerdictView]
    failures: list[str]
    contribution: Contribution
    refused: str = ""
    """Why the whole run counts nowhere (its submission was refused); '' when it counts."""

    @property
    def corrupted(self) -> list[BlobCheck]:
        """Blobs that are missing or no longer match their hash."""
        return [b for b in self.blobs if b.status != "ok"]


def _check(store: BlobStore, sha: str, scratch: Path) -> tuple[str, str]:
    dest = scratch / sha
    try:
        store.get_file(sha, dest)  # streams and verifies the hash; removes dest if bad
    except BlobCorrupted as e:
        return "corrupted", str(e)
    except BlobNotFound as e:
        return "missing", str(e)
    except (StoreError, OSError) as e:
        return "corrupted", f"{type(e).__name__}: {e}"
    dest.unlink(missing_ok=True)
    return "ok", ""


def _verdicts(history: RunHistory, sealed: set[str]) -> list[VerdictView]:
    out: list[VerdictView] = []
    for e in (history.verdicts[key] for key in sorted(history.verdicts)):
        scores = {k: v.score for k, v in sorted(e.scores.items())}
        mean = sum(scores.values()) / len(scores) if scores else math.nan
        out.append(
            VerdictView(
                judge_id=e.judge_id,
                sample=e.sample,
                family=e.judge_family,
                model=e.judge_model,
                scores=scores,
                judge_score=mean,
                tags=list(e.failure_tags),
                rationale=e.rationale,
                files_opened=list(e.files_opened),
                files_cited=list(e.files_cited),
                cited_not_opened=sorted(set(e.files_cited) - set(e.files_opened)),
                opened_not_sealed=sorted(set(e.files_opened) - sealed),
                checks=[(c.name, c.passed, c.detail) for c in e.checks],
                attempts=e.attempts,
                rejected_outputs=e.rejected_outputs.sha256
                if e.rejected_outputs is not None
                else "",
            )
        )
    return out


def _contribution(history: RunHistory, verdicts: list[VerdictView], anchor: int) -> Contribution:
    infra = history.infrastructure_failure
    sums: dict[str, list[float]] = {}
    for v in verdicts:
        # A reviewer's verdict is a reference, not a juror: it never moves the run score.
        if v.judge_id != RULES_JUDGE_ID and v.scores and not is_reviewer_id(v.judge_id):
            acc = sums.setdefault(v.judge_id, [0.0, 0.0])
            acc[0] += sum(v.scores.values())
            acc[1] += len(v.scores)
    judge_scores = {j: s / n for j, (s, n) in sorted(sums.items())}
    scored = bool(judge_scores) and not infra
    score = sum(judge_scores.values()) / len(judge_scores) if scored else math.nan
    tags = Counter(t for v in verdicts for t in set(v.tags))
    return Contribution(
        scored=scored,
        infrastructure_failure=infra,
        judge_scores=judge_scores,
        run_score=score,
        passed=(score >= anchor) if scored else None,
        anchor=anchor,
        tags=dict(sorted(tags.items())),
    )


def _resolved(event: Event, store: BlobStore) -> Event:
    """Seals with their manifest inline (the manifest blob itself is still checked)."""
    if isinstance(event, ArtifactsSealed) and event.manifest is not None:
        try:
            return event.resolved(store.get_bytes).model_copy(update={"manifest": event.manifest})
        except Exception:  # a missing or corrupt manifest shows up as a bad blob
            return event
    return event


def audit_run(
    logged: list[LoggedEvent],
    store: BlobStore,
    *,
    anchor: int = ANCHOR,
    signers: Mapping[int, str] | None = None,
) -> RunAudit:
    """Audit one run from its events (in log order) and the blob store.

    `signers` (sequence → signer, from `load_run_events`) marks refused events: they are
    listed in the chain but count in no verdict, blob check or contribution. A run whose
    every request was refused counts nowhere, and the audit says why (`RunAudit.refused`).
    """
    signers = signers or {}
    accepted = [i for i in logged if not signers.get(i.sequence, "").startswith(REFUSED)]
    events = [_resolved(item.event, store) for item in accepted]
    if not logged:
        raise ValueError("audit_run: no events for this run")
    first = logged[0].event
    history = RunHistory.fold(events)
    if history.request is not None:
        agent = history.request.agent.agent_id
    else:
        agent = history.seal.agent_id if history.seal is not None else ""
    chain = [
        ChainLine(
            item.sequence,
            item.event.occurred_at.isoformat(),
            item.event.event_type,
            item.event.summary_line(),
            signers.get(item.sequence, ""),
        )
        for item in logged
    ]
    blobs: list[BlobCheck] = []
    verdict: dict[str, tuple[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="assay-audit-") as tmp:
        for e in events:
            for role, ref in e.blob_refs():
                if ref.sha256 not in verdict:
                    verdict[ref.sha256] = _check(store, ref.sha256, Path(tmp))
                status, detail = verdict[ref.sha256]
                blobs.append(BlobCheck(role, ref.path, ref.sha256, ref.size, status, detail))
    sealed_paths = {f.path for f in history.seal.files} if history.seal is not None else set()
    verdicts = _verdicts(history, sealed_paths)
    failures = [
        f"{e.judge_id}#{e.sample}: {e.error} ({e.attempts} attempts"
        + (f"; raw output blob {e.raw_output.sha256})" if e.raw_output is not None else ")")
        for e in history.judgment_failures.values()
    ]
    return RunAudit(
        run_id=first.run_id or "",
        campaign_id=first.campaign_id,
        task_id=first.task_id or "",
        agent_id=agent,
        chain=chain,
        blobs=blobs,
        verdicts=verdicts,
        failures=failures,
        contribution=_contribution(history, verdicts, anchor),
        refused=_refused_run(logged, signers),
    )


REFUSED = "REFUSED: "


def _refused_run(logged: list[LoggedEvent], signers: Mapping[int, str]) -> str:
    """Why a run counts nowhere: its request was refused and no other one counts."""
    requests = [signers.get(i.sequence, "") for i in logged if isinstance(i.event, RunRequested)]
    if requests and all(who.startswith(REFUSED) for who in requests):
        return requests[0].removeprefix(REFUSED)
    return ""


def audit_document(audit: RunAudit) -> dict[str, Any]:
    """The audit as plain JSON data, for `assay audit --json` (`canonical_json` encodes it)."""
    verdicts = [
        {
            **v._asdict(),
            "checks": [dict(zip(("name", "passed", "detail"), c, strict=True)) for c in v.checks],
        }
        for v in audit.verdicts
    ]
    return {
        "run_id": audit.run_id,
        "campaign_id": audit.campaign_id,
        "task_id": audit.task_id,
        "agent_id": audit.agent_id,
        "chain": [c._asdict() for c in audit.chain],
        "blobs": [b._asdict() for b in audit.blobs],
        "verdicts": verdicts,
        "failures": audit.failures,
        "contribution": audit.contribution._asdict(),
        "n_corrupted": len(audit.corrupted),
        "refused": audit.refused,
    }


async def counted_until(
    bus: Bus,
    sequence: int,
    trust: TrustList | None,
    state: State | None = None,
    load: Callable[[str], bytes] | None = None,
) -> State:
    """The fold that holds the counting rule's decisions up to at least `sequence`: `state` when
    given, else the aggregator's snapshot (if checked against the same trust), else a new
    one; caught up to the end of the log when it stops short of `sequence`."""
    if state is None:
        root = trust.operator_key if trust is not None else ""
        snapshot = await resume_state(bus.js, bus.settings)
        fresh = State(controls_key=controls_key(bus.settings))
        state = snapshot if snapshot is not None and snapshot.trust_root == root else fresh
    if state.last_sequence < sequence:
        await fold_stream(
            bus.js, bus.stream.name, bus.subjects.events, state=state, trust=trust, load=load
        )
    return state


async def load_run_events(
    bus: Bus,
    run_id: str,
    trust: TrustList | None = None,
    state: State | None = None,
    load: Callable[[str], bytes] | None = None,
) -> tuple[list[LoggedEvent], dict[int, str]]:
    """Every event of one run in log order (any campaign), and who signed each.

    Which events count is the counting rule's decision (`counting.counts`) as the fold of the
    whole log took it: `state` when given (caught up here to the run's last event), else
    the aggregator's snapshot caught up, else a fresh fold. The signer of a refused event
    is `REFUSED: <why>`; with `trust`, that of a counted one is who signed it (else '').
    `load` reads large seal manifests while catching `state` up (see `fold_stream`).
    """
    subject = bus.subjects.event("*", "*", run_id)
    stored: list[tuple[RawMessage, Event]] = []
    async for raw in read_raw(bus.js, bus.stream.name, subject=subject):
        try:
            stored.append((raw, parse_event(raw.data, subject=raw.subject)))
        except InvalidEvent:
            continue  # not an event at all: `assay dlq` and the report list it
    events = [LoggedEvent(raw.sequence, event) for raw, event in stored]
    if not events:
        return events, {}
    state = await counted_until(bus, events[-1].sequence, trust, state, load)
    signers: dict[int, str] = {}
    if trust is not None:
        for (raw, _), verdict in zip(stored, verify_history(trust, stored), strict=True):
            signers[raw.sequence] = verdict.signer
    for item in events:
        refusal = state.refused.get(item.sequence)
        if refusal is not None:
            signers[item.sequence] = REFUSED + refusal.reason
    return events, signers
