"""Aggregator fixtures: a synthetic campaign published to this test's stream on the real server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_schemas import Event
from assay_testing.synthetic_log import LogSpec, publish_events, synthetic_events

SPEC = LogSpec(
    campaign_id="camp",
    n_tasks=10,
    n_agents=3,
    n_epochs=1,
    n_samples=2,
    steps_per_run=5,
    agent_skill=[-1.5, 0.0, 1.5],
    communication_gap={"agent_0": 2.0},
    overclaim_rate={"agent_0": 0.5},
    infrastructure_failure_rate=0.12,
    empty_artifact_rate=0.1,
    scripted=True,
    seed=4,
)
"""Small enough for tests to stay fast; planted: skill order, agent_0 overclaims and
communicates 2 points better than it is accurate."""


class Published(NamedTuple):
    """A log on the bus: its events (in publish order) and the blob store they reference."""

    events: list[Event]
    store: LocalBlobStore
    head: int


async def publish(bus: Bus, spec: LogSpec, store: LocalBlobStore | None = None) -> list[Event]:
    """Generate and publish a synthetic campaign; return its events in log order."""
    events = list(synthetic_events(spec, store=store))
    await publish_events(bus.js, bus.subjects, bus.stream.name, events)
    return events


@pytest.fixture
async def published(bus: Bus, settings: Settings) -> Published:
    """The SPEC campaign on this test's stream, blobs in the settings' local store."""
    store = LocalBlobStore(settings.blob_dir)
    events = await publish(bus, SPEC, store)
    return Published(events, store, len(events))


def run_cli(args: list[str], settings: Settings, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m assay_cli ARGS` with this test's settings in the environment."""
    env = {
        **os.environ,
        "ASSAY_NATS_URL": settings.nats_url,
        "ASSAY_STREAM": settings.stream,
        "ASSAY_SUBJECT_PREFIX": settings.subject_prefix,
        "ASSAY_HOME": str(settings.home),
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "assay_cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )
