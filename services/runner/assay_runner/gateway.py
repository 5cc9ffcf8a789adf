"""The model gateway of one program run: the only way its program reaches a model.

An OpenAI-compatible (POST /v1/chat/completions and /v1/responses) and
Anthropic-compatible (POST /v1/messages) endpoint on a unix socket in the run's gateway
folder, which the sandbox sees at GATEWAY_MOUNT (and its resident forwards to
127.0.0.1:GATEWAY_PORT; both in `assay_schemas`). Each call is checked against the run's limits, sent upstream with the real key (never in the sandbox),
and logged in order as an AgentStepLogged with its request and response as blobs.

A streamed call (`stream: true`) is made upstream as one plain call and its answer is
replayed to the program as its API's server-sent events: the program sees a stream, the
log one step with the whole answer, and the usage is the provider's own count.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import NamedTuple, NotRequired, TypedDict
from urllib.parse import urlsplit

import httpcore
import httpx
from opentelemetry import context as otel_context
from opentelemetry import trace

from assay.http11 import HttpRequest, HttpResponse, Upstream, UpstreamError, serve_connection
from assay.providers import DEFAULT_KEY_ENV, PriceTable, cost, model_call_span, record_answer
from assay.store import BlobStore
from assay.telemetry import current_service, serving
from assay_schemas import (
    GATEWAY_SOCKET,
    AgentSpec,
    AgentStepLogged,
    AssayError,
    Limits,
    StopReason,
    ToolCallRecord,
    Usage,
)

from .agent import Spend, limit_reached
from .gateway_wire import Wire, error_body, finish_reason_of, parse_answer, provider_of, sse_body

__all__ = ["SOCKET_NAME", "Gateway", "ModelCall", "StepLogger"]

SOCKET_NAME = GATEWAY_SOCKET
_MAX_BODY = 16 * 1024 * 1024
_DEFAULT_UPSTREAM = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}
_TRANSPORT_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.ProxyError,
    httpcore.UnsupportedProtocol,
)
_PATHS: dict[str, Wire] = {
    "/v1/chat/completions": "chat",
    "/chat/completions": "chat",
    "/v1/responses": "responses",
    "/responses": "responses",
    "/v1/messages": "messages",
}
_UPSTREAM_PATH: dict[Wire, str] = {
    "chat": "/chat/completions",
    "responses": "/responses",
    "messages": "/v1/messages",
}


class ModelCall(TypedDict):
    """One model call through the gateway: the fields of the AgentStepLogged it becomes."""

    model_output: str
    tool_calls: list[ToolCallRecord]
    usage: Usage
    latency_ms: float
    cost_usd: float
    request_sha256: NotRequired[str]
    response_sha256: NotRequired[str]


StepLogger = Callable[[ModelCall], Awaitable[AgentStepLogged]]
"""Publishes one model call as the next AgentStepLogged (given its fields)."""


class _Refused(AssayError):
    """A model call the gateway answers with an error of its own (`status`, `kind`)."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


@dataclass(kw_only=True)
class Gateway:
    """Serves one run's program; `stop_reason` and `fault` say how the run should end."""

    agent: AgentSpec
    limits: Limits
    prices: PriceTable
    store: BlobStore
    started_at: datetime
    log_step: StepLogger
    steps: list[AgentStepLogged] = field(default_factory=list)
    spend: Spend = field(default_factory=Spend)
    """The totals of `steps`, which each call's limit check reads."""
    stop_reason: StopReason | None = None
    """The limit a call was refused for (the run ends with it)."""
    fault: str | None = None
    """The upstream could not be reached or failed: an infrastructure failure."""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _logging: asyncio.Task[None] | None = None
    """The last answered call's step, logged while the program reads the answer."""
    _server: asyncio.AbstractServer | None = None
    _direct: Upstream | None = None
    _proxied: httpcore.AsyncConnectionPool | None = None
    _trace: otel_context.Context | None = None
    """The run's trace context: calls arrive on connections of their own, outside it."""
    _service: str = ""

    async def start(self, folder: Path) -> None:
        """Listen on folder/SOCKET_NAME (a stale socket of a previous runner is replaced)."""
        path = folder / SOCKET_NAME
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        # TLS and proxies as any httpx client of the runner would set them up. A direct
        # upstream is one kept-alive h11 connection, the cheapest hop for calls made one at
        # a time; httpcore (under httpx) speaks to a proxy. Loading the CAs takes tens of
        # milliseconds per run, so a plain-http upstream skips it.
        self._trace, self._service = otel_context.get_current(), current_service() or ""
        base = self._base_url()
        tls = httpx.create_ssl_context() if urlsplit(base).scheme == "https" else None
        if (proxy := _proxy_for(base)) is not None:
            self._proxied = httpcore.AsyncConnectionPool(ssl_context=tls, proxy=proxy)
        else:
            self._direct = Upstream(base, ssl_context=tls, max_body=_MAX_BODY)
        self._server = await asyncio.start_unix_server(self._serve, path=str(path))
        # Sandbox processes run as other uids: they may connect, never list the folder.
        path.chmod(0o666)

    async def close(self) -> None:
        """Stop listening, log the last call's step, close the upstream client."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        try:
            await self._logged()
        finally:
            if self._direct is not None:
                await self._direct.aclose()
            if self._proxied is not None:
                await self._proxied.aclose()

    async def _logged(self) -> None:
        """Wait for the previous call's step (its failure is raised here, as the run's)."""
        logging, self._logging = self._logging, None
        if logging is not None:
            await logging

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_connection(reader, writer, self.handle, max_body=_MAX_BODY)

    async def handle(self, request: HttpRequest) -> HttpResponse:
        """One HTTP request from the program."""
        wire = _PATHS.get(request.path)
        api = self.agent.provider if wire is None else provider_of(wire)
        try:
            if request.method != "POST" or wire is None:
                raise _Refused(404, "not_found", f"assay gateway serves POST {', '.join(_PATHS)}")
            if api != self.agent.provider:
                raise _Refused(
                    400,
                    "wrong_api",
                    f"this run's model is served over the {self.agent.provider} API",
                )
            async with self._lock:  # one call at a time: steps are logged in call order
                await self._logged()  # limits count every earlier call
                return await self._call(wire, request.headers, request.body)
        except _Refused as e:
            return HttpResponse(e.status, error_body(api, e.kind, str(e)))

    async def _call(self, wire: Wire, headers: dict[str, str], body: bytes) -> HttpResponse:
        try:
            payload = json.loads(body)
            assert isinstance(payload, dict)
        except (ValueError, AssertionError) as e:
            raise _Refused(400, "invalid_request", "the body is not a JSON object") from e
        streamed = payload.pop("stream", False) is True
        usage_chunk = bool((payload.pop("stream_options", None) or {}).get("include_usage"))
        reason = self.stop_reason or limit_reached(self.limits, self.spend, self.started_at)
        if reason is not None:
            self.stop_reason = reason
            raise _Refused(
                403,
                "assay_limit_reached",
                f"assay gateway: this run reached its {reason} limit; no more model calls",
            )
        payload["model"] = self.agent.model  # the campaign's model, whatever the program asks
        sent = json.dumps(payload).encode()
        with (
            serving(self._service),
            model_call_span(
                self.agent.provider, self.agent.model, self._base_url(), context=self._trace
            ) as span,
        ):
            started = time.perf_counter()
            response = await self._upstream(wire, headers, sent)
            latency_ms = (time.perf_counter() - started) * 1000
            if response.status != 200:
                span.set_attribute("error.type", str(response.status))
                span.set_status(trace.Status(trace.StatusCode.ERROR, f"HTTP {response.status}"))
                return HttpResponse(response.status, response.content)
            try:
                answer = json.loads(response.content)
                usage, text, calls = parse_answer(wire, answer)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                self.fault = f"upstream answered an unreadable body: {e}"
                raise _Refused(502, "upstream_error", self.fault) from e
            model, answer_id = answer.get("model"), answer.get("id")
            record_answer(
                span,
                model=model if isinstance(model, str) else self.agent.model,
                usage=usage,
                finish_reason=finish_reason_of(wire, answer),
                response_id=answer_id if isinstance(answer_id, str) else None,
            )
        fields = ModelCall(
            model_output=text,
            tool_calls=calls,
            usage=usage,
            latency_ms=latency_ms,
            cost_usd=cost(usage, self.agent.model, self.prices),
        )
        # The program need not wait for the log: the next call (or close) waits for it.
        self._logging = asyncio.create_task(self._log(fields, sent, response.content))
        if streamed:
            return HttpResponse(
                200,
                sse_body(wire, answer, usage_chunk=usage_chunk),
                content_type="text/event-stream",
            )
        return HttpResponse(200, response.content)

    async def _log(self, fields: ModelCall, sent: bytes, answer: bytes) -> None:
        """Store the call's request and answer, then log it as the run's next step."""
        request_blob, response_blob = await asyncio.to_thread(
            lambda: (self.store.put_bytes(sent), self.store.put_bytes(answer))
        )
        fields["request_sha256"] = request_blob.sha256
        fields["response_sha256"] = response_blob.sha256
        step = await self.log_step(fields)
        self.steps.append(step)
        self.spend.add(step)

    def _base_url(self) -> str:
        return (self.agent.base_url or _DEFAULT_UPSTREAM[self.agent.provider]).rstrip("/")

    async def _upstream(self, wire: Wire, headers: dict[str, str], body: bytes) -> _Answer:
        """POST upstream with the real key; retries transient failures, else a fault."""
        api = provider_of(wire)
        key = os.environ.get(self.agent.api_key_env or DEFAULT_KEY_ENV[api], "")
        url = self._base_url() + _UPSTREAM_PATH[wire]
        if api == "openai":
            auth = [("authorization", f"Bearer {key}")]
        else:
            version = headers.get("anthropic-version", "2023-06-01")
            auth = [("x-api-key", key), ("anthropic-version", version)]
        sent = [*auth, ("content-type", "application/json")]
        last = ""
        for attempt in range(4):
            if attempt:
                await asyncio.sleep(0.2 * 2**attempt)
            try:
                answer = await self._post(url, sent, body)
            except UpstreamError as e:
                last = str(e)
                continue
            if answer.status != 429 and answer.status < 500:
                return answer
            last = f"HTTP {answer.status}"
        self.fault = f"upstream {url} failed: {last}"
        raise _Refused(502, "upstream_error", f"assay gateway: {self.fault}")

    async def _post(self, url: str, headers: list[tuple[str, str]], body: bytes) -> _Answer:
        timeout = self.agent.timeout_s
        if self._direct is not None:
            return _Answer(*await self._direct.post(url, headers, body, timeout=timeout))
        assert self._proxied is not None
        limits = dict.fromkeys(("connect", "read", "write", "pool"), timeout)
        try:
            response = await self._proxied.request(
                "POST", url, headers=headers, content=body, extensions={"timeout": limits}
            )
        except _TRANSPORT_ERRORS as e:
            raise UpstreamError(f"{type(e).__name__}: {e}") from e
        return _Answer(response.status, response.content)


class _Answer(NamedTuple):
    status: int
    content: bytes


def _proxy_for(url: str) -> httpcore.Proxy | None:
    """The proxy the environment names for `url` (HTTPS_PROXY, NO_PROXY, ...), if any."""
    parts = urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxy = urllib.request.getproxies().get(parts.scheme)
    return httpcore.Proxy(proxy) if proxy else None
