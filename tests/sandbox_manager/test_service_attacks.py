"""Hostile runs against the sandbox-manager service: events stay small, sandboxes go away."""

from __future__ import annotations

import asyncio
from pathlib import Path

from assay.bus import Bus
from assay.config import Settings
from assay.sandbox_client import SandboxClient
from assay_aggregator.fold import fold
from assay_sandbox_manager.backends import BubblewrapBackend
from assay_schemas import MAX_EVENT_BYTES, ArtifactsSealed, unb64
from assay_testing.pipeline import wait_for_events
from tests.sandbox_manager.test_service import (
    finished,
    open_sandbox,
    run_requested,
    sandbox_processes,
)

MANY = 30_000


async def no_sandbox_left(backend: BubblewrapBackend, settings: Settings) -> None:
    """The sandbox is destroyed right after its seal is published: wait for that, briefly."""
    for _ in range(100):
        if not backend.list_live():
            break
        await asyncio.sleep(0.1)
    assert backend.list_live() == []
    assert sandbox_processes(settings) == 0


async def test_a_seal_of_many_files_is_a_small_event(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    async with open_sandbox(bus, settings, tmp_path, "many") as opened:
        service, ready, store, task = opened
        client = SandboxClient(bus=bus, instance=ready.instance, sandbox_id=ready.sandbox_id)
        script = f"import os\nfor i in range({MANY}): open(f'f{{i:05}}-padding-name.txt', 'w')"
        out = await client.exec(["python3", "-c", script], timeout_s=60, cwd="/workspace")
        assert out.exit_code == 0, out
        await bus.publish(finished(bus, "many"))
        events = await wait_for_events(
            bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs), timeout=60
        )
        [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
        assert len(sealed.model_dump_json()) < MAX_EVENT_BYTES // 4
        assert sealed.manifest is not None and sealed.files == []
        full = sealed.resolved(store.get_bytes)
        limit = run_requested(bus, "x", task).sandbox.max_artifact_files
        assert sealed.n_files == len(full.files) == limit
        assert len(full.files) + len(full.excluded) == MANY + 1  # + the attachment
        assert {x.reason for x in full.excluded} == {"over artifact count cap"}
        # The aggregator's fold reads the manifest through the same accessor.
        state = fold([(1, sealed)], load=store.get_bytes)
        assert len(state.artifacts["many"]) == limit
        await no_sandbox_left(service.backends["bubblewrap"], settings)


async def test_large_rpc_commands_and_replies_travel_through_the_blob_store(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    async with open_sandbox(bus, settings, tmp_path, "big") as opened:
        service, ready, store, _ = opened
        client = SandboxClient(
            bus=bus, instance=ready.instance, sandbox_id=ready.sandbox_id, store=store
        )
        # 900 KB of output: under the 1,000,000-byte cap, over NATS's 1 MiB once base64'd.
        out = await client.exec("head -c 900000 /dev/zero | tr '\\0' x", timeout_s=20)
        assert out.exit_code == 0 and unb64(out.stdout_b64) == b"x" * 900_000
        payload = bytes(range(256)) * 3600  # 921,600 bytes
        await client.write_file("in.bin", payload)
        assert await client.read_file("in.bin") == payload
        await client.exec("head -c 2000000 /dev/urandom > two.bin", timeout_s=20)
        assert len(await client.read_file("two.bin")) == 2_000_000
        await client.exec(
            "python3 -c \"[open(f'n{i:05}-a-rather-long-name', 'w').close() for i in range(20000)]\"",
            timeout_s=30,
        )
        assert len(await client.list_files()) >= 20_000
        await bus.publish(finished(bus, "big"))
        await wait_for_events(bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs))
        await no_sandbox_left(service.backends["bubblewrap"], settings)
