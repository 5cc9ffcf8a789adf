"""The viewer's contract: what `assay view` reads, and what its review desk writes.

The aggregator's contract says it writes no events, and it does not: the review desk
lives here, and it writes one kind, a reviewer's human verdict (`JudgmentRecorded`, judge
kind ``human``), signed as ``reviewer-<name>`` with that reviewer's enrolled key. Reviewers
have no NATS user of their own: the viewer reads the log and publishes their verdicts over
the CLI's connection (role ``cli``), whose publish rights hold every event a reviewer may
sign (`assay.security.permissions`). The viewer registers no durable and serves no RPC,
so it is no `assay serve` service and is not registered under ``assay.contracts`` (that
would give it a NATS user of its own); the aggregator's counting rule decides whether a
verdict counts.
"""

from __future__ import annotations

from collections.abc import Iterable

from assay.contract import ServiceContract
from assay_schemas import REVIEWER_PREFIX, Event, JudgmentRecorded

__all__ = ["CONTRACT", "NotTheViewers", "check_publishes", "reviewer_signer"]

CONTRACT = ServiceContract(service="viewer", role="cli", publishes=(JudgmentRecorded,))
"""Reads as ``viewer`` over the cli's connection; publishes reviewers' verdicts only."""


class NotTheViewers(TypeError):
    """An event the viewer's contract does not let it publish."""


def reviewer_signer(judge_id: str) -> str:
    """The signing name of a reviewer's verdicts: their judge id, ``reviewer-<name>``."""
    if not judge_id.startswith(REVIEWER_PREFIX):
        raise ValueError(f"{judge_id!r} is no reviewer's judge id ({REVIEWER_PREFIX}<name>)")
    return judge_id


def check_publishes(events: Iterable[Event]) -> None:
    """Refuse, before anything is signed, an event the viewer may not publish."""
    for e in events:
        if not isinstance(e, CONTRACT.publishes):
            raise NotTheViewers(f"the viewer publishes no {type(e).__name__}")
