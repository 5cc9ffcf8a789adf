"""The aggregator's handler: every event folded into the projections, kept live.

On start it loads its snapshot (if any, and if it still fits the stream), folds what
the log holds after it straight from the stream, then starts the durable consumer
``aggregator`` over every event; events the consumer redelivers from before the
snapshot are skipped by event id. While running it writes the snapshot when the state
changed and, once the log has been quiet for a moment, the report as canonical JSON
(``paths_for(settings).report``), which `assay replay --verify` checks against a
fresh rebuild.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

from assay.bus import Bus, Delivery, Refusal
from assay.config import Settings
from assay.security.signing import TrustList
from assay.store import BlobStore
from assay_schemas import Event

from .fold import admitted, apply
from .projections import Projections
from .rebuild import fold_stream
from .report import build_report, report_json
from .snapshot import paths_for, resume_state, save_snapshot, write_atomic
from .state import State
from .statistics import DEFAULT_RESAMPLES

log = logging.getLogger("assay.aggregator")
SNAPSHOT_SHARE = 0.05
"""At most this share of a busy aggregator's time goes to snapshots: they only shorten a
restart's catch-up, the log is the record (the last one is written when it stops)."""

__all__ = ["AggregatorService"]


@dataclass(kw_only=True)
class AggregatorService:
    """Folds every event into the state; persists snapshot and report on its own."""

    bus: Bus
    settings: Settings
    state: State = field(default_factory=State)
    trust: TrustList | None = None
    """Whose signatures count (None: signatures are not checked)."""
    store: BlobStore | None = None
    """Where oversized seal manifests are read from (None: such seals list no files)."""
    flush_interval_s: float = 1.0
    write_report: bool = True
    n_resamples: int = DEFAULT_RESAMPLES
    _saved_version: int = -1
    _next_snapshot: float = 0.0
    _reported_version: int = -1
    _flusher: asyncio.Task[None] | None = None

    @property
    def projections(self) -> Projections:
        """Read-side view of the current state."""
        return Projections(self.state)

    async def on_event(self, event: Event, delivery: Delivery) -> None:
        """Fold one delivered event (duplicates are ignored by id; forgeries refused)."""
        d = delivery
        if admitted(self.state, self.trust, d.sequence, d.subject, d.data, d.headers, event):
            load = self.store.get_bytes if self.store is not None else None
            apply(self.state, d.sequence, event, load)

    async def on_refused(self, refusal: Refusal) -> None:
        """Count a stored message that is not a valid event, as a rebuild would."""
        self.state.refuse(refusal.sequence, refusal.subject, refusal.reason)

    async def catch_up(self) -> None:
        """Load the snapshot and fold what the log holds after it."""
        await self.bus.connect()
        snap = await resume_state(self.bus.js, self.settings)
        self.state = snap or State()
        self._saved_version = self.state.version if snap else -1
        await fold_stream(
            self.bus.js,
            self.bus.stream.name,
            self.bus.subjects.events,
            state=self.state,
            trust=self.trust,
            load=self.store.get_bytes if self.store is not None else None,
        )

    async def start(self) -> None:
        """Catch up, start consuming, and start writing snapshots."""
        await self.catch_up()
        await self.bus.start()
        self._flusher = asyncio.create_task(self._flush_loop())

    async def stop(self) -> None:
        """Stop consuming and write the final snapshot (and report)."""
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
        await self.bus.stop()
        self.flush(report=self.write_report)

    def flush(self, *, report: bool, paced: bool = False) -> None:
        """Write the snapshot if the state changed, and the report if asked and stale.
        `paced`: skip the snapshot until SNAPSHOT_SHARE of the time since the last one
        covers its cost (a 10x campaign's takes tens of seconds of the event loop)."""
        now = time.monotonic()
        if self.state.version != self._saved_version and not (paced and now < self._next_snapshot):
            save_snapshot(self.settings, self.state)
            self._saved_version = self.state.version
            self._next_snapshot = now + (time.monotonic() - now) / SNAPSHOT_SHARE
        if report and self.state.version != self._reported_version:
            self.write_report_file()

    def write_report_file(self) -> None:
        """Write the default report (every campaign, ungrouped) of the current state."""
        version = self.state.version
        rep = build_report(self.projections, n_resamples=self.n_resamples)
        write_atomic(paths_for(self.settings).report, report_json(rep))
        self._reported_version = version

    async def _flush_loop(self) -> None:
        last = self.state.version
        while True:
            await asyncio.sleep(self.flush_interval_s)
            quiet = self.state.version == last
            last = self.state.version
            try:
                # Snapshots are cheap and written whenever the state moved; the report
                # (a full bootstrap) only once the log has been quiet for an interval.
                self.flush(report=self.write_report and quiet, paced=not quiet)
            except Exception:  # a full disk must not stop the consumer; retried next tick
                log.exception("aggregator: writing snapshot/report failed")

    async def wait_for(self, sequence: int, *, timeout: float = 30.0) -> None:
        """Wait until events up to ``sequence`` are folded (tests, tools)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while self.state.last_sequence < sequence:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(
                    f"aggregator at sequence {self.state.last_sequence}, wanted {sequence}"
                )
            await asyncio.sleep(0.05)
