"""One lifecycle for every service: built from settings (and shared parts), then start/stop.

Each service package registers its factory under the ``assay.services`` entry-point group
(``runner = "assay_runner.service:build"``). `assay serve NAME`, `assay up --all`,
`assay run` and the tests all build services the same way, through `build_service`, and
never branch on a service's name: installing a service is what makes it available.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import resource
import signal
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Protocol, cast

from assay.config import Settings
from assay.store import BlobStore
from assay_schemas import ConfigError

__all__ = [
    "YOUNG_OBJECTS",
    "Service",
    "ServiceFactory",
    "build_service",
    "raise_open_files_limit",
    "run_until_signal",
    "serve_alone",
    "service_names",
    "settle_heap",
]

GROUP = "assay.services"


class Service(Protocol):
    """A running part of Assay: it consumes events, acts, and emits events."""

    async def start(self) -> None:
        """Connect, recover what a previous life left, and start consuming."""

    async def stop(self) -> None:
        """Stop consuming and release connections; safe to call once after start."""


class ServiceFactory(Protocol):
    """Builds a service (not started) from settings and, optionally, a shared blob store."""

    def __call__(self, settings: Settings, *, store: BlobStore | None = None) -> Service: ...


def service_names() -> list[str]:
    """Every installed service, by the name `assay serve` takes."""
    return sorted(ep.name for ep in entry_points(group=GROUP))


def build_service(name: str, settings: Settings, *, store: BlobStore | None = None) -> Service:
    """Build the installed service `name` (not started)."""
    found = entry_points(group=GROUP, name=name)
    if not found:
        installed = ", ".join(service_names()) or "none"
        raise ConfigError(f"no service {name!r} is installed (installed: {installed})")
    factory = cast(ServiceFactory, next(iter(found)).load())
    return factory(settings, store=store)


def raise_open_files_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit; the new soft limit.

    A sandbox-manager holds two pipes per live sandbox and every service a socket per
    connection: at hundreds of live runs the usual soft limit of 1024 runs out first."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # An unlimited hard limit still has the kernel's ceiling (nr_open, 1M by default).
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


YOUNG_OBJECTS = 20_000
"""Allocations (less deallocations) between two collections of the youngest generation:
CPython's default, 700, collects and promotes every in-flight run's objects over and over."""


def settle_heap() -> None:
    """Tune the cyclic garbage collector for a long-lived service, once it has started.

    Everything alive after start (modules, classes, the SDKs' and pydantic's schemas,
    connections: about 270,000 objects in a runner) is moved out of the collector's sight
    (`gc.freeze`): it lives as long as the process, yet a full collection scanned it all
    each time: close to a third of a runner's CPU at hundreds of runs in flight (see
    docs/scale.md). Collections of the young generation are made rarer for the same
    reason (`YOUNG_OBJECTS`)."""
    gc.collect()  # what start-up left as garbage is freed now, not frozen with the rest
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, middle, old)


async def run_until_signal(services: Sequence[Service]) -> None:
    """Start `services` in order, run until SIGINT/SIGTERM or cancellation, stop in reverse."""
    raise_open_files_limit()
    started: list[Service] = []
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stopping.set)
    try:
        for service in services:
            await service.start()
            started.append(service)
        settle_heap()
        await stopping.wait()
    finally:
        for service in reversed(started):
            await service.stop()


def serve_alone(name: str) -> None:
    """Run the installed service `name` in this process until a signal stops it: what each
    service's own console entry point (`assay-runner`, ...) does. Settings from ``ASSAY_*``."""
    from assay.telemetry import traced

    settings = Settings()
    try:
        with traced(f"assay-{name}", instance=settings.instance):
            asyncio.run(run_until_signal([build_service(name, settings)]))
    except ConfigError as e:  # e.g. an OTEL_* exporter that is not installed: one line
        raise SystemExit(f"error: {e}") from e
