"""Faults the scripted server can inject instead of a normal answer."""

from __future__ import annotations

import email.utils
import math
import time
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Fault", "FaultKind", "MalformedBody"]

FaultKind = Literal["rate_limit", "server_error", "timeout", "malformed", "status"]
"""What goes wrong: 429, 5xx, no answer in time, a broken body, or any other status."""

MalformedBody = Literal["invalid_json", "missing_fields", "contradictory_usage"]
"""The broken 200 bodies a `malformed` fault can send."""


class Fault(BaseModel):
    """One injected failure; build them with the classmethods."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: FaultKind
    status: int = 500
    retry_after_s: float | None = None
    """Sent as a Retry-After header when set."""
    retry_after_http_date: bool = False
    """Send Retry-After as an HTTP date (rounded up to whole seconds) instead of seconds."""
    hold_s: float = Field(default=5.0, ge=0)
    """For `timeout`: how long to hold the request before dropping the connection."""
    body: MalformedBody = "invalid_json"
    """For `malformed`: which kind of broken 200 response to send."""
    message: str = "injected fault"

    def retry_after_header(self) -> str:
        """The Retry-After value to send: seconds, or an HTTP date rounded up to a second."""
        seconds = self.retry_after_s or 0.0
        if self.retry_after_http_date:
            return email.utils.formatdate(time.time() + math.ceil(seconds), usegmt=True)
        return f"{seconds:g}"

    @classmethod
    def rate_limit(cls, retry_after: float | None = None, *, http_date: bool = False) -> Fault:
        """HTTP 429, optionally with Retry-After (seconds, or an HTTP date)."""
        return cls(
            kind="rate_limit",
            status=429,
            retry_after_s=retry_after,
            retry_after_http_date=http_date,
            message="rate limit exceeded (injected)",
        )

    @classmethod
    def server_error(cls, status: int = 500, *, retry_after: float | None = None) -> Fault:
        """HTTP 5xx (500 by default; 503, 529 "overloaded", ...)."""
        return cls(
            kind="server_error",
            status=status,
            retry_after_s=retry_after,
            message="internal server error (injected)",
        )

    @classmethod
    def timeout(cls, hold_s: float = 5.0) -> Fault:
        """Hold the request for `hold_s` (longer than the client's timeout), then hang up."""
        return cls(kind="timeout", hold_s=hold_s)

    @classmethod
    def malformed(cls, body: MalformedBody = "invalid_json") -> Fault:
        """HTTP 200 whose JSON body is broken, lacks the required fields, or reports usage
        that contradicts itself (more cached than input tokens, a negative count)."""
        return cls(kind="malformed", status=200, body=body)

    @classmethod
    def status_code(cls, status: int, message: str = "injected error") -> Fault:
        """Any other HTTP error status, e.g. 400, 401 or 404."""
        return cls(kind="status", status=status, message=message)

    @classmethod
    def unauthorized(cls) -> Fault:
        """HTTP 401 with an API-style "invalid api key" error."""
        return cls.status_code(401, "invalid api key (injected)")
