"""Sealed control declarations: only holders of the deployment's controls secret read them.

Every service may replay the whole log (a judge back-fills from it), so a
``ControlDeclared`` in clear would tell a judge which runs are controls. Its
:class:`ControlDetails` travel sealed instead, with AES-GCM (the ``cryptography``
package) under a key derived from the deployment's ``controls`` secret (``CONTROLS_KEY``,
``<home>/keys/controls.secret``), the envelope's campaign, task and event id bound in as
associated data; the event id itself is an HMAC of the run id under another key derived
from the same secret. The plaintext is padded to a fixed size, so the sealed text's
length does not tell a variant from another. A reader without the secret sees that the
campaign declared a control for a task, and nothing else.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import ValidationError

from assay.config import Settings
from assay_schemas import ControlDeclared, ControlDetails, InvalidEvent, Producer

from .signing import deployment_secret

__all__ = ["CONTROLS_KEY", "ControlsKey", "SealBroken", "controls_key"]

CONTROLS_KEY = "controls"
"""The deployment secret (`deployment_secret`) that seals control declarations and salts
each campaign's control agents."""

_PAD = 1024
"""The sealed plaintext's size unit: a declaration's JSON is padded to a multiple of it."""
_NONCE = 12


class SealBroken(InvalidEvent):
    """A sealed control declaration does not open: another deployment's secret, or
    tampered with (its text, or the envelope it was sealed with)."""


def _derive(secret: bytes, purpose: str) -> bytes:
    return hmac.new(secret, f"assay-controls\x1f{purpose}".encode(), hashlib.sha256).digest()


def _aad(campaign_id: str, task_id: str, event_id: str) -> bytes:
    return "\x1f".join(("ControlDeclared", campaign_id, task_id, event_id)).encode()


def _choice_aad(campaign_id: str, run_id: str) -> bytes:
    return "\x1f".join(("ControlChoice", campaign_id, run_id)).encode()


_NO_PLAN = bytes(32)
"""What an agent's run seals: no plan (a digest is never all zeros)."""


@dataclass(frozen=True, slots=True, repr=False)
class ControlsKey:
    """The keys derived from a deployment's controls secret (never printed)."""

    secret: bytes

    @property
    def _seal_key(self) -> bytes:
        return _derive(self.secret, "seal")

    def event_id(self, control_run_id: str) -> str:
        """The declaration's event id: deterministic (a retried publish dedupes), yet not
        computable from the run id without the secret."""
        return hmac.new(
            _derive(self.secret, "id"), control_run_id.encode(), hashlib.sha256
        ).hexdigest()[:32]

    def declare(
        self, details: ControlDetails, *, causation_id: str | None, producer: Producer
    ) -> ControlDeclared:
        """The sealed declaration of `details`."""
        event_id = self.event_id(details.control_run_id)
        plain = details.model_dump_json().encode()
        plain += b" " * (-len(plain) % _PAD)
        nonce = os.urandom(_NONCE)
        aad = _aad(details.campaign_id, details.task_id, event_id)
        sealed = AESGCM(self._seal_key).encrypt(nonce, plain, aad)
        return ControlDeclared(
            event_id=event_id,
            campaign_id=details.campaign_id,
            task_id=details.task_id,
            causation_id=causation_id,
            sealed=base64.urlsafe_b64encode(nonce + sealed).decode("ascii"),
            producer=producer,
        )

    def open(self, event: ControlDeclared) -> ControlDetails:
        """What the declaration says; :class:`SealBroken` when it does not open here."""
        where = (
            f"ControlDeclared {event.event_id} (campaign {event.campaign_id}, task {event.task_id})"
        )
        try:
            raw = base64.urlsafe_b64decode(event.sealed.encode("ascii"))
            aad = _aad(event.campaign_id, event.task_id or "", event.event_id)
            plain = AESGCM(self._seal_key).decrypt(raw[:_NONCE], raw[_NONCE:], aad)
        except (InvalidTag, ValueError) as e:
            raise SealBroken(f"{where} does not open with this deployment's controls secret") from e
        try:
            details = ControlDetails.model_validate_json(plain)
        except ValidationError as e:
            raise SealBroken(f"{where} opens to no control's details") from e
        if (details.campaign_id, details.task_id) != (event.campaign_id, event.task_id):
            raise SealBroken(f"{where}: sealed for another campaign or task")
        if self.event_id(details.control_run_id) != event.event_id:
            raise SealBroken(f"{where}: its id is not its run's")
        return details

    def seal_choice(self, campaign_id: str, run_id: str, plan_sha256: str | None) -> str:
        """The sealed choice a model run's first step carries: the plan a control plays,
        or none for an agent's run, the same length either way (`SEALED_CHOICE_CHARS`);
        bound to its run, so it cannot be moved to another."""
        plain = bytes.fromhex(plan_sha256) if plan_sha256 is not None else _NO_PLAN
        if len(plain) != len(_NO_PLAN):
            raise ValueError(f"a plan digest is 32 bytes, not {len(plain)}")
        nonce = os.urandom(_NONCE)
        sealed = AESGCM(self._choice_key).encrypt(nonce, plain, _choice_aad(campaign_id, run_id))
        return base64.urlsafe_b64encode(nonce + sealed).decode("ascii")

    def open_choice(self, campaign_id: str, run_id: str, sealed: str) -> str | None:
        """The plan a run's sealed choice names (None: an agent's run, which plays none);
        :class:`SealBroken` when it does not open here or was sealed for another run."""
        try:
            raw = base64.urlsafe_b64decode(sealed.encode("ascii"))
            aad = _choice_aad(campaign_id, run_id)
            plain = AESGCM(self._choice_key).decrypt(raw[:_NONCE], raw[_NONCE:], aad)
        except (InvalidTag, ValueError) as e:
            raise SealBroken(
                f"run {run_id} (campaign {campaign_id}): its sealed choice does not open "
                "with this deployment's controls secret"
            ) from e
        return None if plain == _NO_PLAN else plain.hex()

    @property
    def _choice_key(self) -> bytes:
        return _derive(self.secret, "choice")


def controls_key(settings: Settings) -> ControlsKey:
    """This deployment's controls key: from `settings.controls_secret` when given (a
    container without the home's keys), else the home's secret (made on first use,
    `deployment_secret`)."""
    if settings.controls_secret is not None:
        return ControlsKey(bytes.fromhex(settings.controls_secret))
    return ControlsKey(deployment_secret(settings, CONTROLS_KEY))
