"""What the viewer reads: the same projections, events and blobs as the report and audit.

One `Source` per viewer process: it keeps one bus connection and a fold it catches up
on every page, so a page never reads a second source of truth and never refolds the log.
"""

from __future__ import annotations

import asyncio
import math
from contextlib import AsyncExitStack
from typing import NamedTuple

import numpy as np

from assay.bus import Bus, read_campaign
from assay.config import Settings
from assay.security.controls import controls_key
from assay.security.signing import trust_for
from assay.store import BlobStore, open_store
from assay_aggregator.audit import REFUSED, RunAudit, audit_run, load_run_events
from assay_aggregator.rebuild import fold_stream
from assay_report.projections import Projections
from assay_report.report import Report, build_report
from assay_report.state import State
from assay_report.statistics._panel import prepare
from assay_schemas import ANCHOR, ArtifactsSealed, FileRef, RunHistory

from .contract import CONTRACT
from .outputs import JudgeOutputs, judge_outputs
from .runs import RunRow, run_rows
from .search import Hit, SearchIndex

__all__ = ["FileRow", "RunView", "Source", "file_tree"]


class FileRow(NamedTuple):
    """One line of a sealed-file tree: a folder (ref None) or a file, at its depth."""

    depth: int
    name: str
    path: str
    ref: FileRef | None


def file_tree(files: list[FileRef]) -> list[FileRow]:
    """Sealed files as an indented tree, folders first at each level, by name."""
    rows: list[FileRow] = []
    seen: set[str] = set()
    for ref in sorted(files, key=lambda f: f.path.split("/")):
        parts = ref.path.split("/")
        for depth in range(len(parts) - 1):
            folder = "/".join(parts[: depth + 1])
            if folder not in seen:
                seen.add(folder)
                rows.append(FileRow(depth, parts[depth] + "/", folder, None))
        rows.append(FileRow(len(parts) - 1, parts[-1], ref.path, ref))
    return rows


class RunView(NamedTuple):
    """One run as the run page shows it: its audit, its folded history, its seal."""

    audit: RunAudit
    history: RunHistory
    seal: ArtifactsSealed | None
    """The seal with its manifest inline (None before the run is sealed)."""
    judges: JudgeOutputs
    """Repairs and raw outputs of the run's judges."""


class Source:
    """The log and the blob store of one stack (or of a reopened run directory)."""

    def __init__(self, settings: Settings, *, resamples: int = 10_000) -> None:
        self.settings = settings
        self.store: BlobStore = open_store(settings)
        self.resamples = resamples
        self._state = State(controls_key=controls_key(settings))
        self._projections = Projections(self._state)
        self._lock = asyncio.Lock()
        self._stack = AsyncExitStack()
        self._bus: Bus | None = None
        self._reports: dict[tuple[str, int], Report] = {}
        self._scores: dict[tuple[str, int], dict[str, float]] = {}
        self._rows: dict[tuple[str, int], list[RunRow]] = {}
        self.index = SearchIndex()

    async def bus(self) -> Bus:
        """The one connection, opened on first use (in the server's event loop)."""
        if self._bus is None:
            self._bus = await self._stack.enter_async_context(
                Bus(self.settings, service=CONTRACT.service)
            )
        return self._bus

    async def close(self) -> None:
        """Close the connection (a later page opens it again)."""
        await self._stack.aclose()
        self._bus = None

    async def projections(self) -> Projections:
        """Projections of the log caught up to its end as it stands now."""
        async with self._lock:
            bus = await self.bus()
            await fold_stream(
                bus.js,
                bus.stream.name,
                bus.subjects.events,
                state=self._state,
                trust=trust_for(self.settings),
                load=self.store.get_bytes,
                observe=self.index.observe,
            )
        return self._projections

    def report(self, p: Projections, campaign: str) -> Report:
        """The report of one campaign, as `assay report --campaign` builds it (cached)."""
        key = (campaign, p.state.version)
        if key not in self._reports:
            self._reports = {key: build_report(p, campaign=campaign, n_resamples=self.resamples)}
        return self._reports[key]

    def run_scores(self, p: Projections, campaign: str) -> dict[str, float]:
        """Run id → run score as the statistics define it (scored runs only)."""
        key = (campaign, p.state.version)
        if key not in self._scores:
            try:
                panel = prepare(p.statistics_tables([campaign]))
                scores = dict(zip(panel.run_ids, np.asarray(panel.run_score).tolist(), strict=True))
            except ValueError:  # nothing rated yet
                scores = {}
            self._scores = {key: {r: s for r, s in scores.items() if not math.isnan(s)}}
        return self._scores[key]

    def rows(self, p: Projections, campaign: str) -> list[RunRow]:
        """The runs table's rows of one campaign (cached per log version)."""
        key = (campaign, p.state.version)
        if key not in self._rows:
            self._rows = {key: run_rows(p, campaign, self.run_scores(p, campaign))}
        return self._rows[key]

    def search(self, p: Projections, campaign: str, query: str) -> dict[str, int]:
        """The runs whose prompt, final message or a step holds every word of `query`
        (each with its first such document, for `snippets`)."""
        runs_of: dict[str, list[str]] = {}
        for r in self.rows(p, campaign):
            runs_of.setdefault(r.task_id, []).append(r.run_id)
        return self.index.search(campaign, query, runs_of)

    def snippets(self, query: str, found: dict[str, int], rows: list[RunRow]) -> dict[str, Hit]:
        """Where `query` matched in each of `rows` (`found`: what `search` returned)."""
        return self.index.snippets(query, {r.run_id: found[r.run_id] for r in rows})

    async def run(self, run_id: str) -> RunView | None:
        """One run's events audited as `assay audit` does (None for an unknown run)."""
        bus = await self.bus()
        # The page's fold decides which events count, as it does for every other page.
        await self.projections()
        async with self._lock:
            events, signers = await load_run_events(
                bus, run_id, trust_for(self.settings), self._state, self.store.get_bytes
            )
        if not events:
            return None
        campaign = await read_campaign(bus, events[0].event.campaign_id)
        anchor = campaign.rubric.pass_threshold if campaign is not None else ANCHOR
        audit = await asyncio.to_thread(
            audit_run, events, self.store, anchor=anchor, signers=signers
        )
        counted = [e.event for e in events if not signers.get(e.sequence, "").startswith(REFUSED)]
        history = RunHistory.fold(counted)
        seal = history.seal
        if seal is not None and seal.manifest is not None:
            seal = seal.resolved(self.store.get_bytes)
        outputs = await asyncio.to_thread(judge_outputs, history, self.store)
        return RunView(audit, history, seal, outputs)
