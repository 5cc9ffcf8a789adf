"""What the scripted server remembers about each request, for assertions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._script import Api, ScriptRequest

__all__ = ["RecordedRequest"]


@dataclass(frozen=True, kw_only=True)
class RecordedRequest:
    """A request the server received, and what it did with it."""

    index: int
    api: Api | None
    path: str
    model: str | None
    headers: dict[str, str]
    body: Any
    """The decoded JSON body (None when it was not JSON)."""
    status: int | None
    """The status sent; None when the connection was dropped (timeout fault)."""
    fault: str | None = None
    """The injected fault's kind, if one was served."""
    error: str | None = None
    """Why a request was refused (bad body, unknown model, script failure)."""
    received_at: float = 0.0
    """`time.monotonic()` when the request was read (before any artificial latency)."""
    request: ScriptRequest | None = field(default=None, repr=False)
    """The normalized request the script saw (None when it never ran)."""
