"""Identifiers: safe subject tokens and deterministic ids derived from causes."""

from __future__ import annotations

import hashlib
import re
from typing import Annotated

from pydantic import StringConstraints

__all__ = ["ID_PATTERN", "Identifier", "derive_id", "safe_token"]

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"
"""Ids become NATS subject tokens, so no dots, wildcards or whitespace."""

Identifier = Annotated[str, StringConstraints(pattern=ID_PATTERN)]

_SEP = "\x1f"


def derive_id(kind: str, *parts: object) -> str:
    """Return a stable id for `kind` from the parts that cause it.

    A retried publish of the same cause yields the same id, which lets JetStream's
    `Nats-Msg-Id` dedupe and consumers stay idempotent.
    """
    text = _SEP.join([kind, *(str(p) for p in parts)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def safe_token(value: str) -> str:
    """Turn a free-form name into an identifier token (used for file-derived task ids)."""
    token = re.sub(r"[^A-Za-z0-9_-]+", "-", value).strip("-_")
    return token[:128] or "x"
