"""The log's invariants read off a running NATS (`assay check`, the end of `assay run`, tests):
the whole log folded as the aggregator folds it, each stored event observed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple

from assay.bus import Bus, RawMessage
from assay.config import Settings
from assay.security.controls import controls_key
from assay.security.signing import trust_for
from assay.store import open_store
from assay_aggregator.invariants import Breach, LogCheck
from assay_aggregator.rebuild import fold_stream
from assay_aggregator.verify import verify
from assay_report.state import State
from assay_schemas import InvalidEvent, parse_event

__all__ = ["CheckResult", "check_stream"]


class CheckResult(NamedTuple):
    """What `check_stream` found: the runs it read, how far, and each breach."""

    runs: int
    log_sequence: int
    breaches: list[Breach]

    @property
    def clean(self) -> bool:
        """No invariant broken."""
        return not self.breaches

    def summary(self) -> str:
        """One line for people."""
        where = f"{self.runs} runs, log up to seq {self.log_sequence}"
        return f"clean: {where}" if self.clean else f"{len(self.breaches)} breach(es) in {where}"


async def check_stream(settings: Settings, *, replay: bool, grace_s: float) -> CheckResult:
    """Fold the whole log as the aggregator does, observing every stored event; then, with
    `replay`, the live report against a fresh replay (`assay replay --verify`'s comparisons)."""
    check = LogCheck(state=State(controls_key=controls_key(settings)))

    def observe(state: State, batch: list[RawMessage]) -> None:
        for raw in batch:
            try:
                event = parse_event(raw.data, subject=raw.subject)
            except InvalidEvent:
                continue  # refused by the fold already; no run to check
            check.observe(raw.sequence, event)

    async with Bus(settings, service="cli") as bus:
        await fold_stream(
            bus.js,
            bus.stream.name,
            bus.subjects.events,
            state=check.state,
            trust=trust_for(settings),
            load=open_store(settings).get_bytes,
            observe=observe,
        )
    breaches = check.breaches(datetime.now(UTC), grace_s)
    if replay:
        for c in await verify(settings):
            if not c.identical:
                breaches.append(
                    Breach(
                        "replay_differs",
                        "",
                        f"{c.name}: the live aggregator and a fresh replay differ\n{c.diff}",
                    )
                )
    return CheckResult(len(check.state.runs), check.state.last_sequence, breaches)
