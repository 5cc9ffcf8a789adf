"""Checking history by its producers' hash chains: one Ed25519 check per linked run.

Every signer numbers its events and puts the digest of its previous event inside the
signed bytes of the next (`Assay-Chain: <chain id>.<index>.<previous digest>`). A valid
signature on an event therefore vouches for every earlier event of its chain whose
digests link up to it. A reader of history groups a batch of messages by (signing key,
chain id), orders each group by index, and checks only the last signature of each run
whose links hold, plus every event's own cheap checks (enrollment, role, campaign,
judge). Whatever does not link — a gap, two events with one index, a digest that does
not match, a log written before chains — is checked on its own signature, so no verdict
depends on the chain being whole: a refused event gets the same reason either way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol

from assay_schemas import Event

from .signing import (
    CHAIN,
    SIGNATURE,
    Enrollment,
    TrustList,
    Verdict,
    bad_signature,
    link_digest,
    signed_bytes,
)

__all__ = ["Link", "Message", "parse_link", "verify_history"]


class Message(Protocol):
    """A stored message as readers of the log hold it (`RawMessage` is one)."""

    @property
    def subject(self) -> str: ...
    @property
    def data(self) -> bytes: ...
    @property
    def headers(self) -> Mapping[str, str]: ...


class Link(NamedTuple):
    """A message's place in its signer's chain."""

    chain_id: str
    number: int
    previous: str
    """Digest of the chain's previous event ('' for the first)."""


def parse_link(header: str) -> Link | None:
    """The link an `Assay-Chain` header names; None when absent or malformed."""
    parts = header.split(".")
    if len(parts) != 3 or not parts[0]:
        return None
    chain_id, index, previous = parts
    if not (index.isascii() and index.isdigit() and len(index) <= 18):
        return None
    return Link(chain_id, int(index), previous)


class _Linked(NamedTuple):
    number: int
    previous: str
    position: int
    """Where the message is in the batch."""


def verify_history(trust: TrustList, batch: Sequence[tuple[Message, Event]]) -> list[Verdict]:
    """The verdict on each stored message of `batch`, as `TrustList.verify` would give it,
    with one signature checked per linked run of a chain instead of one per message."""
    verdicts: list[Verdict | None] = [None] * len(batch)
    signers: dict[int, Enrollment] = {}
    chains: dict[tuple[str, str], list[_Linked]] = {}
    for position, (message, event) in enumerate(batch):
        enrolled = trust.signer_of(message.headers)
        if isinstance(enrolled, str):
            verdicts[position] = Verdict(False, "", enrolled)
            continue
        signers[position] = enrolled
        link = parse_link(message.headers.get(CHAIN, ""))
        if link is None:  # a log from before chains: its own signature only
            verdicts[position] = trust.verify(message.subject, message.data,
                                              message.headers, event)  # fmt: skip
            continue
        key = (enrolled.key, link.chain_id)
        chains.setdefault(key, []).append(_Linked(link.number, link.previous, position))
    for linked in chains.values():
        for run in _runs(linked, batch):
            vouched = _vouched(trust, run, batch)
            for position in run[len(vouched) :]:
                verdicts[position] = bad_signature(signers[position])
            for position in vouched:
                verdicts[position] = trust.authorize(signers[position], batch[position][1])
    checked = [v for v in verdicts if v is not None]
    assert len(checked) == len(batch), "every message of the batch has its verdict"
    return checked


def _digest(message: Message) -> str:
    headers = message.headers
    signed = signed_bytes(message.subject, message.data, headers.get(CHAIN, ""))
    return link_digest(signed, headers.get(SIGNATURE, ""))


def _runs(linked: list[_Linked], batch: Sequence[tuple[Message, Event]]) -> list[list[int]]:
    """Positions of each run of one chain whose indices follow on and whose digests link,
    in index order. An index held by two messages is no link: each stands alone."""
    repeated = {i for i, n in Counter(item.number for item in linked).items() if n > 1}
    runs: list[list[int]] = []
    before: _Linked | None = None
    for item in sorted(linked):
        follows = (
            before is not None
            and item.number not in repeated
            and before.number not in repeated
            and item.number == before.number + 1
            and item.previous == _digest(batch[before.position][0])
        )
        if follows:
            runs[-1].append(item.position)
        else:
            runs.append([item.position])
        before = item
    return runs


def _vouched(trust: TrustList, run: list[int], batch: Sequence[tuple[Message, Event]]) -> list[int]:
    """The longest head of `run` whose last signature holds (it vouches for the rest of
    the head through the digests); the messages after it are forged or altered."""
    for end in range(len(run), 0, -1):
        message = batch[run[end - 1]][0]
        if trust.signature_holds(message.subject, message.data, message.headers):
            return run[:end]
    return []
