"""Errors raised by the provider layer.

```
ProviderError                      (base; `infrastructure` says who is to blame)
├── ProviderConfigError            the spec cannot work (missing API key variable, bad kind)
├── ProviderRequestError           a non-retryable 4xx (400, 401, 403, 404, 422, ...)
├── ProviderUnavailable            retries exhausted: 429 / 5xx / timeout / connection / malformed
└── ProviderTransientError         one failed attempt that may be retried (internal to the retry loop)
    └── ProviderConnectionRefused  nothing listens at the address: retried, but only briefly
```

Every message names the provider and the model, so a line in a log is enough to know which
endpoint misbehaved. `ProviderError` is the one in the project-wide `AssayError` tree.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "ProviderConfigError",
    "ProviderConnectionRefused",
    "ProviderError",
    "ProviderRequestError",
    "ProviderTransientError",
    "ProviderUnavailable",
    "TransientKind",
]

# One class, not a namesake: the tree's ProviderError carries the provider and the model.
from assay_schemas import ProviderError

TransientKind = Literal["rate_limit", "server_error", "timeout", "connection", "malformed"]
"""Why an attempt failed in a way that may succeed when tried again."""


class ProviderConfigError(ProviderError):
    """The provider cannot be built or called as configured (e.g. API key variable unset)."""

    infrastructure = True


class ProviderRequestError(ProviderError):
    """The endpoint rejected the request with a status that retrying cannot fix."""

    def __init__(self, message: str, *, provider: str, model: str, status_code: int | None) -> None:
        super().__init__(message, provider=provider, model=model)
        self.status_code = status_code
        # 401/403/404 mean bad credentials or a wrong model/base_url: the platform's fault.
        # 400/422 are usually caused by the conversation itself (e.g. context too long).
        self.infrastructure = status_code in (401, 403, 404)


class ProviderTransientError(ProviderError):
    """One attempt failed in a retryable way; the retry loop decides what happens next."""

    infrastructure = True

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        model: str,
        kind: TransientKind,
        status_code: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message, provider=provider, model=model)
        self.kind: TransientKind = kind
        self.status_code = status_code
        self.retry_after_s = retry_after_s


class ProviderConnectionRefused(ProviderTransientError):
    """The endpoint's host refused the connection (nothing listens at that port): a
    `connection` failure that the retry loop gives up on after few attempts, since the
    refusal comes at once and waiting rarely makes a server appear."""

    def __init__(self, message: str, *, provider: str, model: str) -> None:
        super().__init__(message, provider=provider, model=model, kind="connection")


class ProviderUnavailable(ProviderError):
    """Every allowed attempt failed; an infrastructure failure, never the agent's."""

    infrastructure = True

    def __init__(
        self, *, provider: str, model: str, attempts: int, last_error: ProviderTransientError
    ) -> None:
        super().__init__(
            f"unavailable after {attempts} attempt(s); last error ({last_error.kind}): "
            f"{last_error.detail}",
            provider=provider,
            model=model,
        )
        self.attempts = attempts
        self.last_error = last_error
