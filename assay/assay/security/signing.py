"""Signed events: who wrote each message on the log, checkable by anyone with one public key.

Every service signs what it publishes with its own Ed25519 key (NATS nkeys format). Its
key is enrolled by the operator: an *enrollment* is a small statement (this key, this
role, this name) signed with the operator's key. Both travel in the message's headers,
so an auditor holding only the stream and the operator's public key can check every
event: the enrollment against the operator key, the event against the enrolled key, and
the event's type (and, for judges, its judge id) against the enrolled role.

Each signer also numbers its events and links each to the digest of the one before
(`Assay-Chain`, inside the signed bytes), so readers of history can check a whole linked
run of events with one signature (`chain.py`); live consumers check every event's own.

Keys live in `<home>/keys/` (mode 0700). A process that holds the operator seed (one
machine: `assay up`, `assay run`, the tests) enrolls its own services on first use; a
deployment hands each service its seed and enrollment instead.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal, NamedTuple

import nacl.exceptions
import nacl.signing
import nkeys

from assay.config import Settings
from assay_schemas import REVIEWER_PREFIX, ConfigError, Event, reviewer_judge_id

from .permissions import Role, events_by_role

__all__ = [
    "CHAIN",
    "SIGNATURE",
    "Enrollment",
    "SignatureCheck",
    "Signer",
    "TrustList",
    "bad_signature",
    "deployment_secret",
    "ensure_operator",
    "link_digest",
    "signed_bytes",
    "signer_for",
    "trust_for",
]

SIGNER = "Assay-Signer"
SIGNATURE = "Assay-Signature"
ENROLLMENT = "Assay-Enrollment"
CHAIN = "Assay-Chain"
"""`<chain id>.<index>.<digest of the chain's previous event>` (see `link_digest`)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _new_seed(prefix: int) -> bytes:
    return bytes(nkeys.encode_seed(os.urandom(32), prefix))


def _verify_key(public_key: str) -> nacl.signing.VerifyKey:
    """The Ed25519 key behind an nkeys public key (prefix and checksum checked)."""
    try:
        raw = base64.b32decode(public_key + "=" * (-len(public_key) % 8))
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"not an nkeys public key: {public_key[:16]!r}") from e
    body, crc = raw[:-2], raw[-2:]
    if len(body) != 33 or bytes(nkeys.crc16_checksum(body)) != crc:
        raise ValueError(f"not an nkeys public key: {public_key[:16]!r}")
    if not nkeys.valid_public_prefix_byte(body[0]):
        raise ValueError(f"unknown nkeys key type in {public_key[:16]!r}")
    return nacl.signing.VerifyKey(bytes(body[1:]))


def _signed_head(subject: str, chain: str) -> bytes:
    # The subject is signed too: a valid event moved onto another subject is refused. The
    # tag keeps a chained message from ever reading as an unchained one (subjects never
    # start with it).
    return (f"assay-chain:{chain}\n{subject}\n" if chain else f"{subject}\n").encode()


def signed_bytes(subject: str, data: bytes, chain: str = "") -> bytes:
    """What a signature covers: the chain link (when there is one), the subject, the bytes."""
    return _signed_head(subject, chain) + data


def link_digest(subject: str, data: bytes, chain: str, signature: str) -> str:
    """The digest the next event of a chain names as its predecessor: of what the
    signature covers (`signed_bytes`) and of the signature too, so an event whose signature
    was tampered with breaks the link."""
    # Hashed piece by piece: a replay digests every event, and joining the pieces first
    # copied each event's bytes once more.
    h = hashlib.sha256(_signed_head(subject, chain))
    h.update(data)
    h.update(b"\n" + signature.encode())
    return _b64(h.digest())


@dataclass
class _Chain:
    """Where one signer's chain stands: its random id, the next index, the last digest."""

    chain_id: str = field(default_factory=lambda: _b64(os.urandom(12)))
    index: int = 0
    last: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)


class Enrollment(NamedTuple):
    """The operator's word that `key` may sign events of `role`, as `name`."""

    key: str
    role: str
    name: str

    def token(self, operator: nkeys.KeyPair) -> str:
        """The enrollment signed by the operator: `<statement>.<signature>`, URL-safe."""
        statement = json.dumps(self._asdict(), sort_keys=True, separators=(",", ":")).encode()
        return f"{_b64(statement)}.{_b64(operator.sign(statement))}"


@dataclass(frozen=True)
class Signer:
    """One service's signing key and its enrollment."""

    keypair: nkeys.KeyPair
    enrollment: str
    _chain: _Chain = field(default_factory=_Chain, compare=False, repr=False)

    @property
    def public_key(self) -> str:
        """The key's nkeys public form (``U…``)."""
        return bytes(self.keypair.public_key).decode("ascii")

    def headers(self, subject: str, data: bytes) -> dict[str, str]:
        """Headers that let anyone holding the operator key check who wrote `data`; each
        call is the next link of this signer's chain."""
        with self._chain.lock:
            chain = self._chain
            link = f"{chain.chain_id}.{chain.index}.{chain.last}"
            signature = _b64(self.keypair.sign(signed_bytes(subject, data, link)))
            chain.index += 1
            chain.last = link_digest(subject, data, link, signature)
        return {
            SIGNER: self.public_key,
            SIGNATURE: signature,
            ENROLLMENT: self.enrollment,
            CHAIN: link,
        }


class SignatureCheck(NamedTuple):
    """Whether a stored message is signed by an enrolled key allowed to write it."""

    ok: bool
    signer: str
    """`role/name (key)` of an accepted signer; empty when refused."""
    reason: str


@dataclass
class TrustList:
    """Checks signatures against enrollments rooted in one operator public key."""

    operator_key: str
    _operator: nacl.signing.VerifyKey = field(init=False)
    _enrolled: dict[str, Enrollment | None] = field(default_factory=dict)
    """Enrollment token → statement (None when the operator did not sign it)."""
    _keys: dict[str, nacl.signing.VerifyKey] = field(default_factory=dict)
    """Public key → decoded verify key (a replay checks thousands of events per key)."""
    _accepts: dict[Enrollment, SignatureCheck] = field(default_factory=dict)
    """Enrolled signer → the check its accepted events carry (one per signer, not per event)."""

    def __post_init__(self) -> None:
        self._operator = _verify_key(self.operator_key)

    def _enrollment(self, token: str) -> Enrollment | None:
        try:
            return self._enrolled[token]
        except KeyError:
            enrolled = self._enrolled[token] = self._check_enrollment(token)
            return enrolled

    def _check_enrollment(self, token: str) -> Enrollment | None:
        try:
            statement, signature = (_unb64(part) for part in token.split(".", 1))
            self._operator.verify(statement, signature)
            data: Any = json.loads(statement)
            return Enrollment(key=str(data["key"]), role=str(data["role"]), name=str(data["name"]))
        except (ValueError, KeyError, TypeError, nacl.exceptions.BadSignatureError):
            return None

    def signer_of(self, headers: Mapping[str, str]) -> Enrollment | str:
        """The enrolled signer a message names, or why it has none. Cheap: each enrollment
        is checked against the operator key once."""
        token, key = headers.get(ENROLLMENT, ""), headers.get(SIGNER, "")
        if not (token and key and headers.get(SIGNATURE)):
            return "unsigned"
        enrolled = self._enrollment(token)
        if enrolled is None:
            return "enrollment not signed by the operator"
        if enrolled.key != key:
            return "signing key is not the enrolled key"
        return enrolled

    def signature_holds(self, subject: str, data: bytes, headers: Mapping[str, str]) -> bool:
        """Whether the message's signature is its signer's over its chain link, subject
        and bytes (the one Ed25519 check)."""
        key = headers.get(SIGNER, "")
        try:
            if key not in self._keys:
                self._keys[key] = _verify_key(key)
            signed = signed_bytes(subject, data, headers.get(CHAIN, ""))
            self._keys[key].verify(signed, _unb64(headers.get(SIGNATURE, "")))
        except (ValueError, nacl.exceptions.BadSignatureError):
            return False
        return True

    def authorize(self, enrolled: Enrollment, event: Event) -> SignatureCheck:
        """Whether the enrolled signer of a genuine message may write this event."""
        if event.event_type not in _writable(enrolled.role):
            return SignatureCheck(
                False, "", f"{enrolled.role}/{enrolled.name} may not write {event.event_type}"
            )
        if enrolled.role == "publisher" and event.campaign_id != enrolled.name:
            return SignatureCheck(
                False, "", f"publisher of {enrolled.name} wrote to campaign {event.campaign_id}"
            )
        if enrolled.role == "judge" and _judge_of(event) not in (None, enrolled.name):
            return SignatureCheck(
                False, "", f"judge {enrolled.name} wrote a verdict as judge {_judge_of(event)}"
            )
        human = vars(event).get("judge_kind", "machine") == "human"
        if human != (enrolled.role == "reviewer"):
            # A human verdict is a reference the jury is measured against: a judge's key
            # cannot pass its own output off as one, nor a reviewer's key write a juror's.
            kind = "a human" if human else "a machine"
            return SignatureCheck(
                False, "", f"{enrolled.role}/{enrolled.name} may not write {kind} verdict"
            )
        if human and _judge_of(event) != reviewer_judge_id(enrolled.name):
            return SignatureCheck(
                False, "", f"reviewer {enrolled.name} wrote a verdict as {_judge_of(event)}"
            )
        return self._accepted(enrolled)

    def _accepted(self, enrolled: Enrollment) -> SignatureCheck:
        try:
            return self._accepts[enrolled]
        except KeyError:
            who = f"{enrolled.role}/{enrolled.name} ({enrolled.key[:12]}…)"
            accepted = self._accepts[enrolled] = SignatureCheck(True, who, "")
            return accepted

    def verify(
        self, subject: str, data: bytes, headers: Mapping[str, str], event: Event
    ) -> SignatureCheck:
        """Accept the message only if every link from the operator key to its bytes holds."""
        enrolled = self.signer_of(headers)
        if isinstance(enrolled, str):
            return SignatureCheck(False, "", enrolled)
        if not self.signature_holds(subject, data, headers):
            return bad_signature(enrolled)
        return self.authorize(enrolled, event)


def bad_signature(enrolled: Enrollment) -> SignatureCheck:
    """The refusal of a message whose signature does not hold."""
    return SignatureCheck(False, "", f"bad signature by {enrolled.role}/{enrolled.name}")


@cache
def _writable(role: str) -> frozenset[str]:
    return frozenset(events_by_role().get(role, ()))


def _judge_of(event: Event) -> str | None:
    # The model's fields, read from its __dict__: a getattr that misses goes through
    # pydantic's __getattr__ and an exception, paid on every event of a signed replay.
    fields = vars(event)
    judge = fields.get("judge")
    if judge is not None:
        return str(judge.judge_id)
    judge_id = fields.get("judge_id")
    return None if judge_id is None else str(judge_id)


# --- keys on disk ------------------------------------------------------------------------


def _keys_dir(settings: Settings) -> Path:
    return settings.home / "keys"


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def deployment_secret(settings: Settings, name: str) -> bytes:
    """This deployment's secret `name` (32 random bytes under the home's keys, mode 0600),
    created on first use and the same ever after, whichever process asks first.

    Whatever is keyed by it (a reviewer's queue order, a campaign's control salts) cannot
    be recomputed from public names by anyone who cannot read the home's keys."""
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,63}", name):
        raise ValueError(f"not a secret's name: {name!r}")
    path = _keys_dir(settings) / f"{name}.secret"
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:  # first use: only the creator (O_EXCL) writes it
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
    for _ in range(100):  # a racing creator may not have written it yet
        text = path.read_text().strip()
        if len(text) == 64:
            return bytes.fromhex(text)
        time.sleep(0.01)
    raise ConfigError(
        f"{path}: not a deployment secret (64 hex digits); remove it to make a new one"
    )


def ensure_operator(settings: Settings) -> str:
    """Create the operator key of this home if missing; return its public key."""
    seed_file = _keys_dir(settings) / "operator.seed"
    if not seed_file.exists():
        _write_private(seed_file, _new_seed(nkeys.PREFIX_BYTE_OPERATOR))
    operator = nkeys.from_seed(bytearray(seed_file.read_bytes().strip()))
    public = bytes(operator.public_key).decode("ascii")
    (_keys_dir(settings) / "operator.pub").write_text(public + "\n")
    return public


SigningRole = Role | Literal["reviewer"]
"""Who may sign what: the NATS users' roles, and reviewers (people grading runs, who
publish over the cli's connection and have no NATS user of their own)."""


def role_of(service: str) -> tuple[SigningRole, str] | None:
    """The role and name a bus of `service` signs as (None: it publishes nothing)."""
    if service.startswith(REVIEWER_PREFIX):
        return "reviewer", service.removeprefix(REVIEWER_PREFIX)
    if service.startswith("judge-"):
        return "judge", service.removeprefix("judge-")
    if service.startswith("publisher-"):
        # An outside system submitting tasks to one campaign (`assay up --publisher`).
        return "publisher", service.removeprefix("publisher-")
    if service in ("runner", "sandbox-manager", "cli", "aggregator"):  # aggregator: CampaignStopped
        return service, service  # type: ignore[return-value]
    return None


def signer_for(settings: Settings, service: str, *, enroll: bool = False) -> Signer | None:
    """The signer of `service`: its enrolled key from `<home>/keys/`, enrolled now by the
    operator seed when this home holds it; None when neither exists (unsigned).

    A reviewer is a person, not a service: their key is enrolled only when asked
    (`enroll`, as `assay keys enroll` does), and a reviewer without one is an error, never
    an unsigned or silently enrolled publisher."""
    identity = role_of(service)
    if identity is None:
        return None
    role, name = identity
    folder = _keys_dir(settings)
    seed_file, token_file = folder / f"{service}.seed", folder / f"{service}.enrollment"
    missing = not (seed_file.exists() and token_file.exists())
    if missing and role == "reviewer" and not enroll:
        raise ConfigError(
            f"reviewer {name!r} has no enrolled key in {folder}: the operator enrolls it "
            f"with `assay keys enroll {service}`"
        )
    if missing:
        operator_seed = folder / "operator.seed"
        if not operator_seed.exists():
            return None
        operator = nkeys.from_seed(bytearray(operator_seed.read_bytes().strip()))
        seed = _new_seed(nkeys.PREFIX_BYTE_USER)
        public = bytes(nkeys.from_seed(bytearray(seed)).public_key).decode("ascii")
        _write_private(seed_file, seed)
        _write_private(token_file, Enrollment(public, role, name).token(operator).encode())
    try:
        keypair = nkeys.from_seed(bytearray(seed_file.read_bytes().strip()))
    except nkeys.NkeysError as e:
        raise ConfigError(f"signing key {seed_file}: {e}") from e
    return Signer(keypair, token_file.read_text().strip())


def trust_for(settings: Settings) -> TrustList | None:
    """The trust list of this deployment: rooted in `ASSAY_OPERATOR_KEY`, else in the
    operator key of this home; None when there is neither (signatures not checked)."""
    key = settings.operator_key
    pub = _keys_dir(settings) / "operator.pub"
    if key is None and pub.exists():
        key = pub.read_text().strip()
    return TrustList(key) if key else None
