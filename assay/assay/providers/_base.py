"""Machinery shared by the SDK-backed providers: slots, retries, timing, error mapping."""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any, NamedTuple

import aiohttp

from ._errors import (
    ProviderConnectionRefused,
    ProviderError,
    ProviderRequestError,
    ProviderTransientError,
)
from ._limiter import AdaptiveLimiter, LimiterKey, default_registry
from ._models import Completion, GenerationParams, Message, ToolDefinition
from ._retry import RetryEvent, RetryPolicy, monotonic_ms, parse_retry_after, run_with_retries
from ._tracing import model_call_span, record_completion

__all__ = ["SdkErrors", "SdkProvider", "classify_sdk_error"]

# Statuses worth another try: timeouts, lock conflicts, rate limits, and server trouble
# (529 is Anthropic's "overloaded").
_RETRYABLE_4XX = frozenset({408, 409, 425, 429})


class SdkErrors(NamedTuple):
    """The exception classes of one SDK (both SDKs share these shapes)."""

    status: type[Exception]
    timeout: type[Exception]
    connection: type[Exception]
    validation: type[Exception]

    @classmethod
    def of(cls, sdk: ModuleType) -> SdkErrors:
        """The classes under their common names in the `openai` or `anthropic` module."""
        return cls(
            status=sdk.APIStatusError,
            timeout=sdk.APITimeoutError,
            connection=sdk.APIConnectionError,
            validation=sdk.APIResponseValidationError,
        )


def _timed_out(exc: BaseException) -> bool:
    """Whether a timeout the SDK reports was one: aiohttp's bridge to httpx reports every
    connection failure (refused, reset, garbage) as a connect timeout; its causes tell."""
    cause: BaseException | None = exc
    for _ in range(8):  # a chain of causes is short; a cycle must not hang this
        cause = cause.__cause__ or cause.__context__ if cause is not None else None
        if cause is None or isinstance(cause, TimeoutError | aiohttp.ServerTimeoutError):
            return True
        if isinstance(cause, aiohttp.ClientConnectionError | ConnectionError):
            return False
    return True


def _connection_cause(exc: BaseException) -> tuple[str, bool]:
    """What broke a connection, from the first cause that says it (the SDKs' own message
    is a generic "Request timed out." or "Connection error." whatever happened), and
    whether it was refused."""
    cause: BaseException | None = exc
    for _ in range(8):  # a chain of causes is short; a cycle must not hang this
        if isinstance(cause, aiohttp.ClientConnectorError):
            refused = isinstance(cause.os_error, ConnectionRefusedError)
            what = "refused" if refused else (cause.os_error.strerror or "failed").lower()
            return f"connection to {cause.host}:{cause.port} {what}", refused
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused", True
        if cause is None:
            break
        cause = cause.__cause__ or cause.__context__
    return f"connection failed: {exc}", False


def _connection_failure(exc: BaseException, *, provider: str, model: str) -> ProviderTransientError:
    """A `connection` failure; a refused one as its own class (retried only briefly)."""
    message, refused = _connection_cause(exc)
    if refused:
        return ProviderConnectionRefused(message, provider=provider, model=model)
    return ProviderTransientError(message, provider=provider, model=model, kind="connection")


def classify_sdk_error(
    exc: BaseException, errors: SdkErrors, *, provider: str, model: str
) -> ProviderError | None:
    """Translate an SDK exception to our tree; None when it is not an SDK failure."""
    if isinstance(exc, aiohttp.ClientError):  # what the SDKs' bridge to aiohttp passes on
        return _connection_failure(exc, provider=provider, model=model)
    if isinstance(exc, errors.timeout) and _timed_out(exc):  # a subclass of `connection`
        return ProviderTransientError(
            "request timed out", provider=provider, model=model, kind="timeout"
        )
    if isinstance(exc, errors.connection):
        return _connection_failure(exc, provider=provider, model=model)
    if isinstance(exc, errors.validation):
        return ProviderTransientError(
            f"response failed validation: {exc}", provider=provider, model=model, kind="malformed"
        )
    if isinstance(exc, errors.status):
        status: int = getattr(exc, "status_code", 0)
        response = getattr(exc, "response", None)
        headers: Mapping[str, str] = response.headers if response is not None else {}
        if status in _RETRYABLE_4XX or status >= 500:
            return ProviderTransientError(
                f"HTTP {status}: {exc}",
                provider=provider,
                model=model,
                kind="rate_limit" if status == 429 else "server_error",
                status_code=status,
                retry_after_s=parse_retry_after(headers),
            )
        return ProviderRequestError(
            f"HTTP {status}: {exc}", provider=provider, model=model, status_code=status
        )
    return None


class SdkProvider(ABC):
    """Base of the SDK-backed providers: one attempt is `_attempt`, the rest is here.

    Each attempt holds a limiter slot only while its HTTP request is in flight, so a
    request waiting out a backoff does not block others.
    """

    kind_name: str = "?"
    sdk_errors: SdkErrors
    sdk_client: Callable[..., Any]
    """The SDK's async client class (`openai.AsyncOpenAI`, `anthropic.AsyncAnthropic`)."""
    sdk_http_client: Callable[[], Any]
    """The SDK's HTTP client on aiohttp (`openai.DefaultAioHttpClient`, the `aiohttp`
    extra), with the SDK's own defaults (limits, redirects, proxies from the environment)."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        limiter: AdaptiveLimiter | None = None,
        max_concurrency: int = 8,
        on_retry: Callable[[RetryEvent], None] | None = None,
        cache_prompt: bool = True,
    ) -> None:
        # max_retries=0: the retry policy is ours (see _retry.py), not the SDK's. The SDK's
        # aiohttp client: its default (httpcore's pool on anyio) was a third of the runner's
        # CPU per agent step with hundreds of runs in flight; aiohttp's costs half as much.
        self._client = self.sdk_client(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=0,
            http_client=self.sdk_http_client(),
        )
        self._model = model
        self.base_url = str(self._client.base_url)
        self.retry = retry or RetryPolicy()
        self._rng = random.Random(self.retry.seed)
        self.limiter = limiter or default_registry.get(
            LimiterKey(self.kind_name, self.base_url, model), max_concurrency
        )
        self._on_retry = on_retry
        self.cache_prompt = cache_prompt
        """Whether requests carry prompt-cache marks (Anthropic breakpoints, OpenAI's key)."""
        self.retry_events: deque[RetryEvent] = deque(maxlen=1000)
        """The most recent retry decisions (delays included), for metrics and tests."""

    @property
    def kind(self) -> str:
        """The API family."""
        return self.kind_name

    @property
    def model(self) -> str:
        """The model requests are sent for."""
        return self._model

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self._model!r}, base_url={self.base_url!r})"

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition] = (),
        params: GenerationParams | None = None,
    ) -> Completion:
        """One model turn with retries, traced as one GenAI span; see
        `ModelProvider.complete`."""
        params = params or GenerationParams()
        with model_call_span(self.kind_name, self._model, self.base_url, params) as span:
            completion = await self._complete(messages, tools, params)
            record_completion(span, completion)
            return completion

    async def _complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        params: GenerationParams,
    ) -> Completion:
        started = monotonic_ms()
        # Translate once: the same request body is replayed on every attempt.
        request = self._build(messages, tools, params)
        latency = 0.0

        async def attempt() -> Completion:
            nonlocal latency
            async with self.limiter.slot() as slot:
                t0 = monotonic_ms()
                try:
                    result = await self._attempt(request)
                except ProviderTransientError as err:
                    if err.kind == "rate_limit":
                        slot.rate_limited()
                    else:
                        slot.neutral()
                    raise
                latency = monotonic_ms() - t0
                return result

        done = await run_with_retries(
            attempt,
            policy=self.retry,
            rng=self._rng,
            provider=self.kind_name,
            model=self._model,
            on_retry=self._record_retry,
        )
        return done.value.model_copy(
            update={
                "latency_ms": latency,
                "elapsed_ms": monotonic_ms() - started,
                "attempts": done.attempts,
            }
        )

    def _record_retry(self, event: RetryEvent) -> None:
        self.retry_events.append(event)
        if self._on_retry is not None:
            self._on_retry(event)

    def _malformed(self, exc: BaseException) -> ProviderTransientError:
        return ProviderTransientError(
            f"malformed response ({type(exc).__name__}: {exc})",
            provider=self.kind_name,
            model=self._model,
            kind="malformed",
        )

    async def _attempt(self, request: dict[str, Any]) -> Completion:
        try:
            raw = await self._send(request)
        except ValueError as exc:
            # The SDKs decode JSON bodies without catching errors (json.JSONDecodeError).
            raise self._malformed(exc) from exc
        except Exception as exc:
            mapped = classify_sdk_error(
                exc, self.sdk_errors, provider=self.kind_name, model=self._model
            )
            if mapped is None:
                raise
            raise mapped from exc
        try:
            return self._normalize(raw)
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as exc:
            # The SDKs build response objects without validating them: missing fields
            # only show up when we read them.
            raise self._malformed(exc) from exc

    @abstractmethod
    def _build(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        params: GenerationParams,
    ) -> dict[str, Any]:
        """The SDK call's keyword arguments for this conversation."""

    @abstractmethod
    async def _send(self, request: dict[str, Any]) -> Any:
        """Make one SDK call and return the SDK's response object."""

    @abstractmethod
    def _normalize(self, raw: Any) -> Completion:
        """Turn the SDK's response object into a `Completion`."""

    async def aclose(self) -> None:
        """Close the SDK client's connection pool."""
        await self._client.close()
