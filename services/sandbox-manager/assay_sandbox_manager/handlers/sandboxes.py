"""The sandboxes one instance holds: their slots under `max_live`, the threads their
backends' calls run on, and destroying one."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from assay.bus import Bus
from assay.store import BlobStore
from assay_schemas import RunRequested, SandboxReady, SandboxSpec

from ..backends import SandboxBackend, SandboxNotFound
from ..failover import SealWatch

__all__ = ["Sandboxes"]

T = TypeVar("T")


@dataclass(kw_only=True)
class Sandboxes:
    """What every role of `SandboxService` shares: the sandboxes this instance holds."""

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
    max_warm: int = 64
    """Most sandboxes held made ahead of their run's drive (`sandbox_warm`): a request
    past it waits, its message kept in progress, until a drive claims one."""
    _warm: set[str] = field(default_factory=set)
    """Run ids whose sandbox is being made or is ready, and no drive has claimed yet (a
    sandbox's id is its run's)."""
    _drive_began: dict[str, datetime] = field(default_factory=dict)
    """sandbox id -> when a drive first claimed it or ran a command in it (this process)."""
    _drive_seen: datetime | None = None
    """When a drive last claimed or commanded any sandbox here: a runner is around."""
    _opening: set[str] = field(default_factory=set)
    _closing: set[str] = field(default_factory=set)
    """Run ids whose sandbox is being made, and sandboxes being destroyed: they count
    against `max_live` too."""
    _room: asyncio.Condition = field(default_factory=asyncio.Condition)
    """Notified whenever a sandbox is released or an opening ends."""
    _owned: dict[str, str] = field(default_factory=dict)
    """sandbox id -> backend name, for sandboxes this instance holds."""
    _running: dict[str, int] = field(default_factory=dict)
    """sandbox id -> commands running in it now."""
    _ended: set[str] = field(default_factory=set)
    """Sandboxes whose run ended (being sealed or destroyed): they take no more commands."""
    _quiet: asyncio.Condition = field(default_factory=asyncio.Condition)
    """Notified whenever a command ends."""
    drive_lease_s: float = 15.0
    """How long a drive holding a sandbox may go without claiming it again or starting or
    ending a command before another drive's claim takes it over (`sandbox_drive_lease_s`)."""
    _drives: dict[str, str] = field(default_factory=dict)
    """sandbox id -> the drive holding its lease: the only one whose commands run."""
    _busy_at: dict[str, float] = field(default_factory=dict)
    """sandbox id -> when its holder last claimed it or a command in it started or ended
    (the event loop's clock)."""
    _live: dict[str, tuple[RunRequested, SandboxReady]] = field(default_factory=dict)
    """run id -> request and SandboxReady announced (or found live) here, until sealed: what
    sealing needs without reading the log (a run's sandbox is this instance's alone)."""
    _threads: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=64, thread_name_prefix="sandbox")
    )
    """Backend calls block (processes, dockerd, disk). Long agent commands must not starve
    sandbox creation, sealing, or the rest of the process of threads, so they get their own
    pool instead of asyncio's small default one."""

    async def _blocking(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._threads, partial(fn, *args))

    async def _finished(self, fn: Callable[..., T], *args: Any) -> T:
        """`_blocking` for a call that must not be left running behind a cancel: the
        cancel (a stop cancelling the handler at work) waits for the call to end. A
        destroy left in its thread went on after the stop had returned, so whoever tore
        down next found the sandbox still there and removed it a second time (dockerd:
        409, removal already in progress)."""
        call = asyncio.ensure_future(self._blocking(fn, *args))
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await call
            raise

    def backend_for(self, spec: SandboxSpec) -> SandboxBackend:
        """The backend a run's spec asks for."""
        try:
            return self.backends[spec.backend]
        except KeyError as e:
            raise RuntimeError(
                f"sandbox backend {spec.backend!r} is not enabled on instance {self.instance}"
            ) from e

    @contextlib.asynccontextmanager
    async def _slot(self, run_id: str) -> AsyncIterator[None]:
        """Room for one more sandbox under `max_live` and `max_warm`, held while it is
        being opened (then it counts as owned until `_destroy`, and as warm until a drive
        claims it)."""
        async with self._room:
            await self._room.wait_for(
                lambda: self._held() < self.max_live and len(self._warm) < self.max_warm
            )
            self._opening.add(run_id)
            self._warm.add(run_id)
        try:
            yield
        finally:
            self._opening.discard(run_id)
            if run_id not in self._owned:  # not opened after all: nothing waits in it
                self._warm.discard(run_id)
            await self._released()

    def _held(self) -> int:
        opening = self._opening.difference(self._owned)  # a sandbox's id is its run's
        return len(self._owned) + len(opening) + len(self._closing)

    async def _released(self) -> None:
        async with self._room:
            self._room.notify_all()

    async def _driven(self, sandbox_id: str) -> None:
        """A drive claimed the sandbox or ran a command in it: it leaves the warm pool,
        and its run's time in this sandbox begins (the reaper's clock)."""
        now = datetime.now(UTC)
        self._drive_seen = now
        self._drive_began.setdefault(sandbox_id, now)
        if sandbox_id in self._warm:
            self._warm.discard(sandbox_id)
            await self._released()

    @contextlib.asynccontextmanager
    async def _command(self, sandbox_id: str) -> AsyncIterator[None]:
        """One command running in the sandbox: counted until it ends."""
        self._running[sandbox_id] = self._running.get(sandbox_id, 0) + 1
        self._busy(sandbox_id)
        try:
            yield
        finally:
            self._busy(sandbox_id)
            left = self._running.pop(sandbox_id) - 1
            if left:
                self._running[sandbox_id] = left
            async with self._quiet:
                self._quiet.notify_all()

    def _busy(self, sandbox_id: str) -> None:
        self._busy_at[sandbox_id] = asyncio.get_running_loop().time()

    def _idle_s(self, sandbox_id: str) -> float:
        """How long since the sandbox's holder last claimed it or a command in it started
        or ended. A command still running does not count: a drive at work renews its
        claim, and a dead runner's orphan command must not hold the sandbox until its
        timeout."""
        since = self._busy_at.get(sandbox_id)
        return float("inf") if since is None else asyncio.get_running_loop().time() - since

    async def _quiesce(self, sandbox_id: str) -> None:
        """Take no more commands into the sandbox, stop those running, and wait for them.

        A run's end can arrive while a command still runs in its sandbox: a second drive
        of the run (its SandboxReady delivered again while a runner still drove it), or
        an orphan of a drive that died. No logged step can hold it any more (the run
        ended), and it may run until its timeout: it is killed, not waited for, and only
        then is the workspace copied for the seal (never while a command writes it)."""
        self._ended.add(sandbox_id)
        name = self._owned.get(sandbox_id)
        if sandbox_id in self._running and name is not None:
            await self._blocking(self.backends[name].stop_commands, sandbox_id)
        async with self._quiet:
            await self._quiet.wait_for(lambda: sandbox_id not in self._running)

    async def _destroy(self, sandbox_id: str) -> None:
        await self._quiesce(sandbox_id)
        name = self._owned.pop(sandbox_id, None)
        targets = [self.backends[name]] if name else list(self.backends.values())
        # Counted until destroyed, so that a waiting request never finds the node holding
        # one more sandbox than the limit; released even when destroying fails, so that
        # the limit never stalls on one.
        self._closing.add(sandbox_id)
        try:
            for backend in targets:
                try:
                    await self._finished(backend.destroy, sandbox_id)
                except SandboxNotFound:
                    continue
        finally:
            self._closing.discard(sandbox_id)
            self._warm.discard(sandbox_id)
            self._drive_began.pop(sandbox_id, None)
            await self._released()
        self.destroyed.add(sandbox_id)
        self._ended.discard(sandbox_id)
        self._drives.pop(sandbox_id, None)
        self._busy_at.pop(sandbox_id, None)
