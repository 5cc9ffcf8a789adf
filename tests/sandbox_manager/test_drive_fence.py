"""The drive lease at the sandbox-manager: only the drive holding a sandbox runs commands
in it (the fence against two runners driving one run, tests/faults/test_drive_lease.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.sandbox_client import DriveHeld, DriveSuperseded, SandboxClient
from assay_schemas import ExecCommand, SandboxReply
from tests.sandbox_manager.test_service import open_sandbox

LEASE_S = 1.0


def client_of(bus: Bus, instance: str, sandbox_id: str, drive_id: str) -> SandboxClient:
    return SandboxClient(bus=bus, instance=instance, sandbox_id=sandbox_id, drive_id=drive_id)


async def test_a_command_naming_another_drive_or_none_is_refused_and_runs_nothing(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    async with open_sandbox(bus, settings, tmp_path, "r1") as opened:
        ready = opened.ready
        holder = client_of(bus, ready.instance, ready.sandbox_id, "drive-a")
        await holder.claim()
        assert (await holder.exec("true", timeout_s=10)).exit_code == 0
        forged = client_of(bus, ready.instance, ready.sandbox_id, "drive-forged")
        with pytest.raises(DriveSuperseded):
            await forged.exec("touch /workspace/forged.txt", timeout_s=10)
        with pytest.raises(DriveSuperseded):
            await forged.write_file("forged2.txt", b"x")
        # No drive at all: a command as an older runner, or a hand-made request, sends it.
        anonymous = ExecCommand(
            sandbox_id=ready.sandbox_id, command="touch /workspace/anonymous.txt", timeout_s=10
        )
        subject = bus.subjects.rpc("sandbox", ready.instance)
        raw = await bus.request(subject, anonymous.model_dump_json().encode(), timeout=20)
        reply = SandboxReply.model_validate_json(raw)
        assert (reply.ok, reply.error_kind) == (False, "superseded")
        # The holder is not disturbed, and no refused command touched the workspace.
        listed = {f.path for f in await holder.list_files()}
        assert not listed & {"forged.txt", "forged2.txt", "anonymous.txt"}
        # A claim by another drive while the holder is at work is refused.
        running = asyncio.create_task(holder.exec("sleep 2", timeout_s=10))
        await asyncio.sleep(0.5)
        with pytest.raises(DriveHeld):
            await forged.claim()
        assert (await running).exit_code == 0


async def test_a_holder_silent_past_the_lease_is_taken_over_and_refused_after(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    async with open_sandbox(bus, settings, tmp_path, "r2") as opened:
        opened.service.drive_lease_s = LEASE_S
        ready = opened.ready
        first = client_of(bus, ready.instance, ready.sandbox_id, "drive-1")
        second = client_of(bus, ready.instance, ready.sandbox_id, "drive-2")
        assert await first.claim() == LEASE_S
        # A holder renewing its claim keeps the sandbox through a command past the lease.
        running = asyncio.create_task(
            first.exec("sleep 4; touch /workspace/late.txt", timeout_s=10)
        )
        for _ in range(5):
            await asyncio.sleep(LEASE_S / 3)
            await first.claim()
        with pytest.raises(DriveHeld):
            await second.claim()
        # Then it falls silent (its runner died or stalled): its command is an orphan.
        await asyncio.sleep(LEASE_S * 1.5)
        await second.claim()  # taken over: the orphan is stopped first
        with pytest.raises(DriveSuperseded):
            await running
        with pytest.raises(DriveSuperseded):
            await first.exec("touch /workspace/later.txt", timeout_s=10)
        with pytest.raises(DriveHeld):  # and it cannot claim the sandbox back at once
            await first.claim()
        await asyncio.sleep(3)  # past the orphan's sleep: it was stopped, not left
        listed = {f.path for f in await second.list_files()}
        assert not listed & {"late.txt", "later.txt"}


def test_only_a_small_claim_is_answered_outside_the_command_slots() -> None:
    from assay_sandbox_manager.handlers.exec_server import is_claim
    from assay_schemas import ClaimDrive, ExecCommand

    claim = ClaimDrive(sandbox_id="s1", drive_id="d1").model_dump_json().encode()
    assert is_claim(claim)
    command = ExecCommand(sandbox_id="s1", drive_id="d1", command="true")
    assert not is_claim(command.model_dump_json().encode())
    assert not is_claim(b"not json")
    padded = claim[:-1] + b', "pad": "' + b"x" * 2000 + b'"}'
    assert not is_claim(padded)  # a claim-shaped flood goes through the slots
