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
from assay.security.controls import controls_key
from assay.security.signing import TrustList
from assay.store import BlobStore
from assay_report.projections import Projections
from assay_report.report import build_report, report_json
from assay_report.state import State
from assay_report.statistics import DEFAULT_RESAMPLES
from assay_schemas import CampaignStopped, Event, StoppingFigure

from .fold import apply, counts_signed
from .rebuild import fold_stream, head_sequence
from .snapshot import load_snapshot, paths_for, save_snapshot, write_atomic

log = logging.getLogger("assay.aggregator")

SNAPSHOT_SHARE = 0.05
"""At most this share of the aggregator's CPU goes to snapshots while the log is busy (CPU,
not wall time: on a busy machine a dump's wall time counts the other processes' turns)."""

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
    _saved_at: float = 0.0
    """This process's CPU seconds when the last snapshot was written."""
    _save_cost_s: float = 0.0
    """CPU seconds the last snapshot took to write: a whole state's dump grows with the log."""
    _reported_version: int = -1
    _flusher: asyncio.Task[None] | None = None
    _stops_published: set[str] = field(default_factory=set)
    """Campaigns whose `CampaignStopped` this process published (until it is folded back)."""

    @property
    def projections(self) -> Projections:
        """Read-side view of the current state."""
        return Projections(self.state)

    async def on_event(self, event: Event, delivery: Delivery) -> None:
        """Fold one delivered event (duplicates are ignored by id; forgeries refused)."""
        d = delivery
        # The bus checked the signature of what it hands over (`signer`): checked once.
        trust = None if d.signer else self.trust
        if counts_signed(self.state, trust, d.sequence, d.subject, d.data, d.headers, event):
            load = self.store.get_bytes if self.store is not None else None
            if apply(self.state, d.sequence, event, load):
                await self.publish_stops()

    async def publish_stops(self) -> None:
        """Publish `CampaignStopped` for each campaign the fold decided to stop and the log
        does not hold yet (its id derives from the campaign: a repeat is deduped). Called
        after every folded event and after catching up, so a decision taken before a crash
        is published on restart."""
        for record in self.state.stopping.values():
            c = record.campaign_id
            if record.decision is None or record.logged is not None or c in self._stops_published:
                continue
            fields = dict(record.decision)
            fields["figures"] = [StoppingFigure.model_validate(f) for f in fields["figures"]]
            event = CampaignStopped(
                event_id=CampaignStopped.id_for(c),
                campaign_id=c,
                producer=self.bus.producer,
                **fields,
            )
            await self.bus.publish(event)
            self._stops_published.add(c)
            log.info("campaign %s stopped: %s", c, event.summary_line())

    async def on_refused(self, refusal: Refusal) -> None:
        """Count a stored message that is not a valid event, as a rebuild would; one the
        bus refused for its signature only is refused by the counting rule, with its why."""
        r = refusal
        if r.event is not None and not counts_signed(
            self.state, self.trust, r.sequence, r.subject, r.data, r.headers, r.event
        ):
            return
        self.state.refuse(r.sequence, r.subject, r.reason)

    async def catch_up(self) -> None:
        """Load the snapshot and fold what the log holds after it."""
        await self.bus.connect()
        head = await head_sequence(self.bus.js, self.bus.stream.name)
        snap = load_snapshot(self.settings)
        if snap is not None and snap.last_sequence > head:
            log.warning(
                "snapshot is ahead of the stream (%d > %d): rebuilding", snap.last_sequence, head
            )
            snap = None
        self.state = snap or State(controls_key=controls_key(self.settings))
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
        await self.publish_stops()
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

    def flush(self, *, report: bool, live: bool = False) -> None:
        """Write the snapshot if the state changed, and the report if asked and stale.

        live: while events stream in, a snapshot is written only once SNAPSHOT_SHARE of the
        CPU spent since the last one pays for it (a dump of the whole state every second would
        cost more than folding the events as the log grows); a restart folds the rest."""
        now = time.process_time()
        due = not live or now - self._saved_at >= self._save_cost_s / SNAPSHOT_SHARE
        if self.state.version != self._saved_version and due:
            save_snapshot(self.settings, self.state)
            self._saved_version = self.state.version
            self._saved_at = time.process_time()
            self._save_cost_s = self._saved_at - now
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
                # Snapshots are written whenever the state moved (paced while busy); the report
                # (a full bootstrap) only once the log has been quiet for an interval.
                self.flush(report=self.write_report and quiet, live=not quiet)
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
