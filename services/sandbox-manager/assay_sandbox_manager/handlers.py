"""Sandbox manager: RunRequested → sandbox; commands over NATS; run ended → seal, destroy."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from assay.bus import Bus, Delivery, Unchanged
from assay.store import BlobStore
from assay_schemas import (
    RPC_INLINE_BYTES,
    AgentFinished,
    ArtifactsSealed,
    AssayError,
    BlobCommand,
    BusError,
    ErrorInfo,
    Event,
    Exclusion,
    FailureStage,
    LogChanged,
    RunFailed,
    RunHistory,
    RunRequested,
    SandboxCommand,
    SandboxReady,
    SandboxReply,
    SandboxRequest,
    SandboxSpec,
    same_run,
)

from .backends import (
    ResidentUnavailable,
    SandboxBackend,
    SandboxExists,
    SandboxLimitExceeded,
    SandboxNotFound,
    SandboxPathError,
)
from .bundles import ensure_bundle
from .commands import error_reply, run_command
from .extension import extension_hash
from .failover import SealWatch, seal_declared_lost
from .runtime import recipe_hash
from .seal import Seal, SealCaps, answer_fields, seal_fields, store_copy

__all__ = ["RunOverdue", "SandboxGivenUp", "SandboxService"]

log = logging.getLogger("assay.sandbox_manager")

T = TypeVar("T")
E = TypeVar("E", bound=Event)

_SETTLE_READS = 3
"""Reads of a run's failures before its seal gives up for this delivery: each refused seal
means a failure was logged meanwhile, which a read then sees; only a flood of them on one
run would use all three."""

_COMMAND: TypeAdapter[SandboxCommand] = TypeAdapter(SandboxCommand)
_REQUEST: TypeAdapter[SandboxRequest] = TypeAdapter(SandboxRequest)


class SandboxGivenUp(AssayError):
    """The sandbox-manager stopped retrying a run's sandbox or its seal (dead-lettered)."""


class RunOverdue(AssayError):
    """A run held a sandbox past its wall-clock limit (and a grace) without ending."""


OVERDUE_GRACE_S = 300.0
"""Past a run's `wall_clock_s`, how long its sandbox waits for the run to end before the
sandbox-manager ends it: the runner checks the limit only between steps, and a step may
still be in a model call and a command (each bounded by its own timeout)."""
OVERDUE_CHECK_S = 30.0


@dataclass(kw_only=True)
class SandboxService:
    """Owns the sandboxes of one instance; every effect is idempotent under redelivery."""

    bus: Bus
    store: BlobStore
    backends: dict[str, SandboxBackend]
    instance: str
    destroyed: set[str] = field(default_factory=set)
    seal_watch: SealWatch | None = None
    """Watches other instances' seals (see failover); None: this instance watches none."""
    max_live: int = 4096
    """Most sandboxes held at once (`sandbox_max_live`): a request past it waits, its
    message kept in progress, until one is destroyed."""
    overdue_grace_s: float = OVERDUE_GRACE_S
    overdue_check_s: float = OVERDUE_CHECK_S
    _overdue_watch: asyncio.Task[None] | None = None
    _opening: set[str] = field(default_factory=set)
    _closing: set[str] = field(default_factory=set)
    """Run ids whose sandbox is being made, and sandboxes being destroyed: they count
    against `max_live` too."""
    _room: asyncio.Condition = field(default_factory=asyncio.Condition)
    """Notified whenever a sandbox is released or an opening ends."""
    _owned: dict[str, str] = field(default_factory=dict)
    _live: dict[str, tuple[RunRequested, SandboxReady]] = field(default_factory=dict)
    """run id -> request and SandboxReady announced (or found live) here, until sealed: what
    sealing needs without reading the log (a run's sandbox is this instance's alone)."""
    """sandbox id -> backend name, for sandboxes this instance holds."""
    _threads: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=64, thread_name_prefix="sandbox")
    )
    """Backend calls block (processes, dockerd, disk). Long agent commands must not starve
    sandbox creation, sealing, or the rest of the process of threads, so they get their own
    pool instead of asyncio's small default one."""

    async def _blocking(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._threads, partial(fn, *args))

    def backend_for(self, spec: SandboxSpec) -> SandboxBackend:
        """The backend a run's spec asks for."""
        try:
            return self.backends[spec.backend]
        except KeyError as e:
            raise RuntimeError(
                f"sandbox backend {spec.backend!r} is not enabled on instance {self.instance}"
            ) from e

    # --- events -------------------------------------------------------------------------

    async def on_run_requested(self, event: RunRequested, delivery: Delivery) -> None:
        """Create the run's sandbox, copy the attachments in, announce SandboxReady."""
        assert event.run_id is not None
        if event.run_id in self._live:
            # Opened here already (a redelivery after SandboxReady's publish, before the
            # ack): opening it again would destroy the one in use as "half-made". One
            # still being opened holds the redelivery in the bus until it is done.
            return
        async with self._slot(event.run_id):
            await self._open(event, delivery)

    @contextlib.asynccontextmanager
    async def _slot(self, run_id: str) -> AsyncIterator[None]:
        """Room for one more sandbox under `max_live`, held while it is being opened (then
        it counts as owned until `_destroy`)."""
        async with self._room:
            await self._room.wait_for(lambda: self._held() < self.max_live)
            self._opening.add(run_id)
        try:
            yield
        finally:
            self._opening.discard(run_id)
            await self._released()

    def _held(self) -> int:
        opening = self._opening.difference(self._owned)  # a sandbox's id is its run's
        return len(self._owned) + len(opening) + len(self._closing)

    async def _released(self) -> None:
        async with self._room:
            self._room.notify_all()

    async def _open(self, event: RunRequested, delivery: Delivery) -> None:
        assert event.run_id is not None
        events = await self.bus.run_events(
            event.campaign_id, event.run_id, known={delivery.sequence: event}
        )
        history = RunHistory.fold(events)
        if history.stage not in ("unknown", "requested"):
            return  # already done (redelivery, or another instance won)
        backend = self.backend_for(event.sandbox)
        sandbox_id = event.run_id
        labels = {
            "assay.campaign": event.campaign_id,
            "assay.run": event.run_id,
            "assay.task": event.task.task_id,
            "assay.instance": self.instance,
        }
        try:
            if event.sandbox.bundle_sha256 is not None:
                await self._blocking(ensure_bundle, self.store, event.sandbox.bundle_sha256)
            try:
                await self._blocking(backend.create, event.sandbox, sandbox_id, labels)
            except SandboxExists:  # half-made before a crash: start it over
                await self._blocking(backend.destroy, sandbox_id)
                await self._blocking(backend.create, event.sandbox, sandbox_id, labels)
            self._owned[sandbox_id] = backend.name
            for ref in event.task.attachments:
                data = await self._blocking(self.store.get_bytes, ref.sha256)
                await self._blocking(backend.write_file, sandbox_id, ref.path, data)
        except Exception as e:
            log.exception("sandbox for run %s failed", event.run_id)
            await self._destroy(sandbox_id)
            await self.bus.publish(
                RunFailed(
                    event_id=RunFailed.id_for(event.run_id, "sandbox"),
                    **same_run(event),
                    stage="sandbox",
                    error=ErrorInfo.of(e).text,
                    error_info=ErrorInfo.of(e),
                    infrastructure=True,
                    producer=self.bus.producer,
                )
            )
            return
        ready = SandboxReady(
            event_id=SandboxReady.id_for(event.run_id),
            **same_run(event),
            sandbox_id=sandbox_id,
            backend=backend.name,
            instance=self.instance,
            image_digest=runtime_digest(backend.name, event.sandbox),
            workspace=list(event.task.attachments),
            producer=self.bus.producer,
        )
        await self.bus.publish(ready)
        self._live[event.run_id] = (event, ready)

    async def on_run_ended(self, event: Event, delivery: Delivery) -> None:
        """Seal what the run left (AgentFinished or RunFailed), then destroy its sandbox."""
        assert isinstance(event, AgentFinished | RunFailed) and event.run_id is not None

        campaign, run = event.campaign_id, event.run_id
        if (known := self._live.get(run)) is not None:
            return await self._settle(*known, event)

        # What sealing needs of the run's history, not its steps: one lookup each.
        def first(kind: type[E]) -> Awaitable[E | None]:
            subject = self.bus.subjects.event(kind.__name__, campaign, run)
            return self.bus.first_event(subject, kind)

        request, ready, seal, failures = await asyncio.gather(
            first(RunRequested), first(SandboxReady), first(ArtifactsSealed),
            self.bus.run_events(campaign, run, types=(RunFailed,)),
        )  # fmt: skip
        lost = seal_declared_lost(failures)
        if ready is None or ready.instance != self.instance:
            if self.seal_watch is not None and seal is None and not lost:
                self.seal_watch.watch(ready, event)  # in case the owner is gone for good
            return  # not ours (or never created): the owner seals it
        if seal is not None or lost:
            await self._destroy(ready.sandbox_id)
            return
        assert request is not None, f"run {event.run_id} has SandboxReady but no RunRequested"
        await self._settle(request, ready, event)

    async def _settle(self, request: RunRequested, ready: SandboxReady, ended: Event) -> None:
        """Seal the run unless another instance declared its seal lost while this one was
        out of reach; then destroy its sandbox.

        The declaration may be logged after the run's end, even after this instance read
        the log: the seal is published on condition that nothing was logged on the run's
        RunFailed subject since it was read, and the survivor's declaration on condition
        that no seal was, so the log holds one or the other, never both.
        """
        campaign, run = ended.campaign_id, ended.run_id or ""
        failed = self.bus.subjects.event(RunFailed.__name__, campaign, run)
        for _ in range(_SETTLE_READS):
            seen = await self.bus.last_sequence(failed)
            # An empty subject has nothing to read: a failure logged since this lookup
            # fails the seal's condition, and the next turn reads it.
            failures = await self.bus.run_events(campaign, run, types=(RunFailed,)) if seen else []
            if seal_declared_lost(failures):
                self._live.pop(run, None)
                return await self._destroy(ready.sandbox_id)
            try:
                return await self.seal(request, ready, ended, unchanged=Unchanged(failed, seen))
            except LogChanged:
                continue  # a failure was logged meanwhile: read it, decide again
        raise BusError(
            f"run {ended.run_id}: its RunFailed subject changed on each of {_SETTLE_READS} "
            "reads; not sealed this time"
        )

    async def seal(
        self,
        request: RunRequested,
        ready: SandboxReady,
        ended: Event,
        *,
        unchanged: Unchanged | None = None,
    ) -> None:
        """Copy, store and announce the run's files; then destroy the sandbox.
        `unchanged`: the announcement's condition (see `_settle`); LogChanged when it
        fails, with the sandbox left as it was."""
        backend = self.backend_for(request.sandbox)
        try:
            caps = SealCaps.of(request.sandbox)
            copy = await self._blocking(backend.copy_for_seal, ready.sandbox_id, caps)
        except SandboxNotFound:
            seal = Seal([], [_lost()])
        else:
            seal = await self._blocking(store_copy, copy, self.store)
        fields = await self._blocking(seal_fields, seal, self.store)
        answer = await self._blocking(answer_fields, ended, self.store)
        await self.bus.publish(
            ArtifactsSealed(
                event_id=ArtifactsSealed.id_for(request.run_id),
                **same_run(request, cause=ended),
                **fields,
                **answer,
                agent_id=request.agent.agent_id,
                epoch=request.epoch,
                sandbox_id=ready.sandbox_id,
                outcome="finished" if isinstance(ended, AgentFinished) else "failed",
                producer=self.bus.producer,
            ),
            unchanged=unchanged,
        )
        self._live.pop(request.run_id or "", None)
        await self._destroy(ready.sandbox_id)

    async def _destroy(self, sandbox_id: str) -> None:
        name = self._owned.pop(sandbox_id, None)
        targets = [self.backends[name]] if name else list(self.backends.values())
        # Counted until destroyed, so that a waiting request never finds the node holding
        # one more sandbox than the limit; released even when destroying fails, so that
        # the limit never stalls on one.
        self._closing.add(sandbox_id)
        try:
            for backend in targets:
                try:
                    await self._blocking(backend.destroy, sandbox_id)
                except SandboxNotFound:
                    continue
        finally:
            self._closing.discard(sandbox_id)
            await self._released()
        self.destroyed.add(sandbox_id)

    async def on_given_up(self, event: Event, delivery: Delivery, reason: str) -> None:
        """A run's RunRequested, or its end, failed on every delivery: the run gets a
        RunFailed (sandbox, or seal) unless it already ended that way, and its sandbox on
        this instance is destroyed, so that nothing is left running for a run nobody
        drives any more."""
        assert event.run_id is not None
        history = RunHistory.fold(await self.bus.run_events(event.campaign_id, event.run_id))
        request = history.request
        opening = isinstance(event, RunRequested)
        stage: FailureStage = "sandbox" if opening else "seal"
        what = "RunRequested" if opening else f"end ({event.event_type})"
        # Opening: a run with a SandboxReady is the runner's to end. Sealing: a run with a
        # seal is settled; one that failed already keeps that failure.
        sealed = history.seal is not None or isinstance(history.ended, RunFailed)
        done = history.sandbox is not None if opening else sealed
        if request is not None and not done and (not opening or history.ended is None):
            error = SandboxGivenUp(
                f"gave up on the {stage} of run {event.run_id} after {delivery.attempt} "
                f"deliveries of its {what}; the last failed with {reason}"
            )
            await self.bus.publish(
                RunFailed(
                    event_id=RunFailed.id_for(event.run_id, stage),
                    **same_run(request, cause=event),
                    stage=stage,
                    error=ErrorInfo.of(error).text,
                    error_info=ErrorInfo.of(error),
                    infrastructure=True,
                    producer=self.bus.producer,
                )
            )
        if opening and history.sandbox is not None:
            return  # ready: the runner drives it, and its end destroys the sandbox
        self._live.pop(event.run_id, None)
        await self._destroy(event.run_id)  # a sandbox's id is its run's

    async def end_overdue(self) -> list[str]:
        """End every run holding a sandbox here past its wall-clock limit plus the grace
        with no end logged (its runner gone for good, or stuck): RunFailed, after which
        its end seals and destroys the sandbox as any run's. The run ids ended."""
        now = datetime.now(UTC)
        ended = []
        for run_id, (request, ready) in list(self._live.items()):
            allowed = request.limits.wall_clock_s + self.overdue_grace_s
            held = (now - ready.occurred_at).total_seconds()
            if held < allowed:
                continue
            history = RunHistory.fold(await self.bus.run_events(ready.campaign_id, run_id))
            if history.ended is not None:
                continue  # its end is on its way to the seal
            error = RunOverdue(
                f"run {run_id} held its sandbox {held:.0f} s, past its wall-clock limit "
                f"({request.limits.wall_clock_s:g} s) and {self.overdue_grace_s:g} s more, "
                "with no end logged"
            )
            await self.bus.publish(
                RunFailed(
                    event_id=RunFailed.id_for(run_id, "agent"),
                    **same_run(request, cause=ready),
                    stage="agent",
                    error=ErrorInfo.of(error).text,
                    error_info=ErrorInfo.of(error),
                    infrastructure=True,
                    producer=self.bus.producer,
                )
            )
            ended.append(run_id)
        return ended

    async def _watch_overdue(self) -> None:
        while True:
            await asyncio.sleep(self.overdue_check_s)
            try:
                await self.end_overdue()
            except Exception:  # the bus may be down for a while: the next turn tries again
                log.exception("ending overdue runs failed")

    # --- restart ------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, reconcile leftovers from a previous life, then start consuming."""
        await self.bus.connect()
        await self.reconcile()
        await self.bus.start()
        if self.seal_watch is not None:
            self.seal_watch.start()
        self._overdue_watch = asyncio.create_task(self._watch_overdue())

    async def stop(self) -> None:
        """Stop consuming and serving commands; live sandboxes stay for the next life."""
        if self._overdue_watch is not None:
            self._overdue_watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._overdue_watch
            self._overdue_watch = None
        if self.seal_watch is not None:
            await self.seal_watch.stop()
        await self.bus.stop()

    async def reconcile(self) -> int:
        """On start: seal sandboxes of finished runs, destroy orphans; keep live runs.

        Returns how many sandboxes were sealed or destroyed.
        """
        changed = 0
        for backend in self.backends.values():
            for info in await self._blocking(backend.list_live):
                if info.labels.get("assay.instance", self.instance) != self.instance:
                    continue
                changed += await self._reconcile_sandbox(backend, info.sandbox_id, info.labels)
        return changed

    async def _reconcile_sandbox(
        self, backend: SandboxBackend, sandbox_id: str, labels: dict[str, str]
    ) -> bool:
        """Seal or destroy one leftover sandbox; keep it if its run is still going."""
        campaign, run = labels.get("assay.campaign"), labels.get("assay.run")
        history = RunHistory.fold(
            await self.bus.run_events(campaign, run) if campaign and run else []
        )
        request, ready, ended = history.request, history.sandbox, history.ended
        if request is not None and ready is not None and ready.sandbox_id == sandbox_id:
            if ended is None:
                self._owned[sandbox_id] = backend.name  # still running: the runner resumes it
                self._live[ready.run_id or ""] = (request, ready)
                return False
            if history.seal is None and not seal_declared_lost(history.failures):
                self._owned[sandbox_id] = backend.name
                await self._settle(request, ready, ended)
                return True
        await self._blocking(backend.destroy, sandbox_id)
        self.destroyed.add(sandbox_id)
        return True

    # --- commands -----------------------------------------------------------------------

    async def handle_command(self, body: bytes) -> bytes:
        """Answer one sandbox command; every failure is a reply, never a crash."""
        try:
            request = _REQUEST.validate_json(body)
            command = await self._unwrap(request)
        except ValidationError as e:
            return error_reply("internal", f"malformed sandbox command: {e}")
        except Exception as e:
            return error_reply(
                "internal", f"sandbox command blob unreadable: {type(e).__name__}: {e}"
            )
        sid = command.sandbox_id
        if sid not in self._owned:
            kind = "destroyed" if sid in self.destroyed else "not_found"
            return error_reply(
                kind,
                f"sandbox {sid}: {'destroyed' if kind == 'destroyed' else 'unknown'} on instance {self.instance}",
            )
        backend = self.backends[self._owned[sid]]
        try:
            reply = await self._blocking(run_command, backend, command)
        except SandboxNotFound as e:
            self._owned.pop(sid, None)
            await self._released()
            return error_reply("not_found", str(e))
        except SandboxPathError as e:
            return error_reply("path", str(e))
        except SandboxLimitExceeded as e:
            return error_reply("limit", str(e))
        except ResidentUnavailable as e:
            return error_reply("broken", str(e))
        except Exception as e:
            log.exception("sandbox command failed")
            return error_reply("internal", f"sandbox {sid}: {type(e).__name__}: {e}")
        return await self._encode(reply)

    async def _unwrap(self, request: SandboxRequest) -> SandboxCommand:
        """A command sent by reference is read from the blob store (hash verified there)."""
        if not isinstance(request, BlobCommand):
            return request
        body = await self._blocking(self.store.get_bytes, request.sha256)
        command = _COMMAND.validate_json(body)
        if command.sandbox_id != request.sandbox_id:
            raise ValueError(f"blob {request.sha256} is a command for another sandbox")
        return command

    async def _encode(self, reply: SandboxReply) -> bytes:
        """The reply as one NATS message: inline when small, else by reference to a blob."""
        body = reply.model_dump_json().encode()
        if len(body) <= RPC_INLINE_BYTES:
            return body
        info = await self._blocking(self.store.put_bytes, body)
        return SandboxReply(ok=True, reply_blob=info.sha256).model_dump_json().encode()


def _lost() -> Exclusion:
    return Exclusion(
        path="/workspace", reason="sandbox lost before sealing (nothing could be read)"
    )


def runtime_digest(backend: str, spec: SandboxSpec) -> str:
    """Which runtime the sandbox runs: the rootfs recipe hash (both backends import it),
    and its extension's hash where the run has one."""
    extension = f"+ext-{extension_hash(spec.packages)}" if spec.packages else ""
    return f"{backend}:rootfs-{recipe_hash()}{extension}"
