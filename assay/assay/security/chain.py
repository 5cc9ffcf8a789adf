"""Checking history by its producers' hash chains: one Ed25519 check per linked run.

Every signer numbers its events and puts the digest of its previous event inside the
signed bytes of the next (`Assay-Chain: <chain id>.<index>.<previous digest>`). A valid
signature on an event therefore vouches for every earlier event of its chain whose
digests link up to it. A reader of history groups a batch of messages by (signing key,
chain id), orders each group by index, and checks only the last signature of each run
whose links hold, plus every event's own cheap checks (enrollment, role, campaign,
judge). Whatever does not link — a gap, two events with one index, a digest that does
not match, a log written before chains — is checked on its own signature, so no
signature check depends on the chain being whole: a refused event gets the same reason
either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol

from assay_schemas import Event

from .signing import (
    CHAIN,
    SIGNATURE,
    Enrollment,
    SignatureCheck,
    TrustList,
    bad_signature,
    link_digest,
)

__all__ = ["Link", "Message", "check_signatures", "parse_link", "verify_history"]


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


def check_signatures(
    trust: TrustList, batch: Sequence[Message]
) -> list[Enrollment | SignatureCheck]:
    """Per stored message of `batch`: its enrolled signer when its signature holds, else
    the refusal, with one Ed25519 check per linked run of a chain instead of one per
    message. What the signer may write is left to `TrustList.authorize`."""
    found: list[Enrollment | SignatureCheck] = []
    chains: dict[tuple[str, str], list[_Linked]] = {}
    for position, message in enumerate(batch):
        enrolled = trust.signer_of(message.headers)
        if isinstance(enrolled, str):
            found.append(SignatureCheck(False, "", enrolled))
            continue
        found.append(enrolled)
        link = parse_link(message.headers.get(CHAIN, ""))
        if link is None:  # a log from before chains: its own signature only
            if not trust.signature_holds(message.subject, message.data, message.headers):
                found[position] = bad_signature(enrolled)
            continue
        key = (enrolled.key, link.chain_id)
        chains.setdefault(key, []).append(_Linked(link.number, link.previous, position))
    for linked in chains.values():
        for run in _runs(linked, batch):
            for position in run[len(_vouched(trust, run, batch)) :]:
                signer = found[position]
                assert isinstance(signer, Enrollment)
                found[position] = bad_signature(signer)
    return found


def verify_history(
    trust: TrustList, batch: Sequence[tuple[Message, Event]]
) -> list[SignatureCheck]:
    """The signature check of each stored message of `batch`, as `TrustList.verify` gives
    it, with signatures checked by chain (`check_signatures`)."""
    signers = check_signatures(trust, [message for message, _ in batch])
    return [
        trust.authorize(signer, event) if isinstance(signer, Enrollment) else signer
        for signer, (_, event) in zip(signers, batch, strict=True)
    ]


def _digest(message: Message) -> str:
    headers = message.headers
    return link_digest(
        message.subject, message.data, headers.get(CHAIN, ""), headers.get(SIGNATURE, "")
    )


def _runs(linked: list[_Linked], batch: Sequence[Message]) -> list[list[int]]:
    """Positions of each run of one chain whose indices follow on one by one and whose
    digests link, in index order. Two messages with one index (a forged copy of a link)
    never share a run: each is then vouched for only by its own signature or a later one
    that names its digest."""
    runs: list[list[int]] = []
    before: _Linked | None = None
    for item in sorted(linked):
        follows = (
            before is not None
            and item.number == before.number + 1
            and item.previous == _digest(batch[before.position])
        )
        if follows:
            runs[-1].append(item.position)
        else:
            runs.append([item.position])
        before = item
    return runs


def _vouched(trust: TrustList, run: list[int], batch: Sequence[Message]) -> list[int]:
    """The longest head of `run` whose last signature holds (it vouches for the rest of
    the head through the digests); the messages after it are forged or altered."""
    for end in range(len(run), 0, -1):
        message = batch[run[end - 1]]
        if trust.signature_holds(message.subject, message.data, message.headers):
            return run[:end]
    return []
