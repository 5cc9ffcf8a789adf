"""`ScriptedModelServer`: OpenAI and Anthropic HTTP APIs on loopback, answered by scripts."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import json
import math
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from assay.http11 import HttpRequest, HttpResponse, serve_connection
from assay.lifecycle import Startable
from assay.providers import Usage

from ._cache import PromptCache
from ._faults import Fault
from ._images import image_tokens, images_in
from ._records import RecordedRequest
from ._script import Api, Script, ScriptReply, estimate_usage
from ._wire import error_body, malformed_body, parse_request, reply_body

__all__ = ["ScriptedModelServer", "ScriptedServerNotStarted"]


class ScriptedServerNotStarted(RuntimeError):
    """The scripted model server could not bind its address (a taken port)."""


_ROUTES: dict[str, Api] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}


@dataclass
class _ModelState:
    faults: deque[Fault] = field(default_factory=deque)
    always: Fault | None = None
    latency_s: float | None = None


class ScriptedModelServer(Startable):
    """Serves scripted models over the real HTTP APIs, in a background thread.

    ```python
    with ScriptedModelServer({"m": ScriptedSequence(["hello"])}) as server:
        OpenAI(base_url=server.openai_base_url), Anthropic(base_url=server.base_url)
    ```
    Faults injected for a model are served in order before its normal replies; a
    permanent fault (`fail_always`) makes the model a dead endpoint. Every request is
    recorded unless `record` is False (a load bench: a million parsed bodies kept would
    cost the shared machine more in garbage collection than the serving itself). Usage
    the server estimates carries the prompt cache's reads and writes as each API
    documents them (`PromptCache`) when `prompt_cache` is True (off by default: the
    cache's hits depend on the order requests arrive, so two runs of one campaign that
    interleave differently, as the fault tests compare, would differ); a script's own
    usage is reported as it is. All public methods are thread-safe.
    """

    def __init__(
        self,
        scripts: Mapping[str, Script] | None = None,
        *,
        default_script: Script | None = None,
        latency_s: float = 0.0,
        require_api_key: str | None = None,
        record: bool = True,
        prompt_cache: bool = False,
    ) -> None:
        self._record_requests = record
        self._cache = PromptCache() if prompt_cache else None
        self._scripts: dict[str, Script] = dict(scripts or {})
        self._default_script = default_script
        self._latency_s = latency_s
        self._require_api_key = require_api_key
        self._state: dict[str, _ModelState] = {}
        self._records: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._port = 0

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, port: int = 0) -> Self:
        """Bind 127.0.0.1 on `port` (0: a free one) and serve from a background thread;
        `ScriptedServerNotStarted` when it cannot (the port is taken), and it may be
        started again."""
        if self._thread is not None:
            raise RuntimeError("scripted model server already started")
        ready = threading.Event()
        failure: list[BaseException] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run, args=(ready, failure, port), name="scripted-model-server", daemon=True
        )
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise ScriptedServerNotStarted(
                f"scripted model server failed to start on port {port}"
            ) from failure[0]
        return self

    def stop(self) -> None:
        """Stop serving, drop open connections, join the thread."""
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._thread = None

    def _run(self, ready: threading.Event, failure: list[BaseException], port: int) -> None:
        assert self._loop is not None
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._on_connection, "127.0.0.1", port)
            )
            self._port = self._server.sockets[0].getsockname()[1]
        except BaseException as e:
            failure.append(e)
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._shutdown())
            loop.close()

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()

    # -- addresses -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (0 before `start`)."""
        return self._port

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`: the base_url for `anthropic.AsyncAnthropic`."""
        return f"http://127.0.0.1:{self._port}"

    @property
    def openai_base_url(self) -> str:
        """base_url for `openai.AsyncOpenAI` (with the `/v1` suffix)."""
        return f"{self.base_url}/v1"

    # -- programming -----------------------------------------------------------------------

    def add_script(self, model: str, script: Script) -> None:
        """Serve `model` with `script` (replacing any earlier one)."""
        with self._lock:
            self._scripts[model] = script

    def inject(self, model: str, faults: Iterable[Fault]) -> None:
        """Queue faults for `model`, served in order before its normal replies."""
        with self._lock:
            self._model(model).faults.extend(faults)

    def fail_always(self, model: str, fault: Fault | None = None) -> None:
        """Make every request for `model` fail (a dead endpoint); 500 by default."""
        with self._lock:
            self._model(model).always = fault or Fault.server_error()

    def heal(self, model: str) -> None:
        """Drop queued and permanent faults for `model`."""
        with self._lock:
            state = self._model(model)
            state.faults.clear()
            state.always = None

    def set_latency(self, model: str, latency_s: float | None) -> None:
        """Artificial latency for `model` (None: the server-wide default)."""
        with self._lock:
            self._model(model).latency_s = latency_s

    def requests(
        self, model: str | None = None, *, api: Api | None = None
    ) -> list[RecordedRequest]:
        """Recorded requests, oldest first, optionally for one model and/or API."""
        with self._lock:
            return [
                r
                for r in self._records
                if (model is None or r.model == model) and (api is None or r.api == api)
            ]

    def clear_requests(self) -> None:
        """Forget recorded requests."""
        with self._lock:
            self._records.clear()

    def _model(self, model: str) -> _ModelState:
        return self._state.setdefault(model, _ModelState())

    # -- serving ---------------------------------------------------------------------------

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await serve_connection(reader, writer, self._handle)
        except asyncio.CancelledError:
            # Only `stop()` cancels connections; ending quietly keeps asyncio's stream
            # callback from logging the cancellation as an error.
            pass
        finally:
            self._connections.discard(task)

    def _record(self, **fields: Any) -> None:
        if not self._record_requests:
            return
        with self._lock:
            self._records.append(RecordedRequest(index=len(self._records), **fields))

    async def _handle(self, req: HttpRequest) -> HttpResponse | None:
        received_at = time.monotonic()
        api = _ROUTES.get(req.path) if req.method == "POST" else None
        body: Any = None
        with contextlib.suppress(ValueError):
            body = json.loads(req.body) if req.body else None
        model = body.get("model") if isinstance(body, dict) else None
        base: dict[str, Any] = {
            "api": api,
            "path": req.path,
            "model": model,
            "headers": req.headers,
            "body": body,
            "received_at": received_at,
        }
        if api is None:
            self._record(**base, status=404, error="no such route")
            return _json(404, {"error": {"message": f"no route {req.method} {req.path}"}})
        if not isinstance(body, dict) or not isinstance(model, str):
            return self._refuse(api, base, 400, "request body must be JSON with a model")
        if not self._authorized(req.headers):
            return self._refuse(api, base, 401, "invalid api key")

        with self._lock:
            state = self._model(model)
            fault = state.faults.popleft() if state.faults else state.always
            latency = self._latency_s if state.latency_s is None else state.latency_s
            script = self._scripts.get(model, self._default_script)
        if latency > 0:
            await asyncio.sleep(latency)
        if fault is not None:
            return await self._serve_fault(api, base, fault)
        if script is None:
            return self._refuse(api, base, 404, f"model {model!r} not found (no script)")

        try:
            request = parse_request(api, body)
            if self._cache is not None:
                self._cache.check(api, body)
        except (KeyError, ValueError, TypeError) as e:
            return self._refuse(api, base, 400, f"invalid request: {type(e).__name__}: {e}")
        try:
            outcome = script(request)
            reply = await outcome if inspect.isawaitable(outcome) else outcome
        except Exception as e:
            # A broken script is a test bug: answer 400 so the client fails fast, not retries.
            return self._refuse(api, base, 400, f"script error: {type(e).__name__}: {e}")
        usage = reply.usage or self._estimate(api, body, req.body, reply)
        prefix = "chatcmpl" if api == "openai" else "msg"
        payload = reply_body(request, reply, usage, f"{prefix}_scripted_{next(self._ids)}")
        self._record(**base, status=200, request=request)
        return _json(200, payload)

    def _estimate(self, api: Api, body: dict[str, Any], raw: bytes, reply: ScriptReply) -> Usage:
        estimated = estimate_usage(raw, reply)
        images = images_in(body)
        if images:  # billed by size, not by the characters of their base64
            chars = len(raw) - sum(len(d) for d in images)
            tokens = math.ceil(max(0, chars) / 4) + sum(image_tokens(api, d) for d in images)
            estimated = estimated.model_copy(update={"input_tokens": max(1, tokens)})
        return estimated if self._cache is None else self._cache.usage(api, body, estimated)

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        key = self._require_api_key
        if key is None:
            return True
        return headers.get("authorization") == f"Bearer {key}" or headers.get("x-api-key") == key

    def _refuse(self, api: Api, base: dict[str, Any], status: int, message: str) -> HttpResponse:
        self._record(**base, status=status, error=message)
        return _json(status, error_body(api, status, message))

    async def _serve_fault(
        self, api: Api, base: dict[str, Any], fault: Fault
    ) -> HttpResponse | None:
        if fault.kind == "timeout":
            self._record(**base, status=None, fault=fault.kind)
            await asyncio.sleep(fault.hold_s)
            return None
        self._record(**base, status=fault.status, fault=fault.kind)
        if fault.kind == "malformed":
            return HttpResponse(200, malformed_body(api, fault.body))
        headers: dict[str, str] = {}
        if fault.retry_after_s is not None:
            headers["retry-after"] = fault.retry_after_header()
        return _json(fault.status, error_body(api, fault.status, fault.message), headers)


def _json(status: int, payload: Any, headers: dict[str, str] | None = None) -> HttpResponse:
    return HttpResponse(status, json.dumps(payload).encode(), headers or {})
