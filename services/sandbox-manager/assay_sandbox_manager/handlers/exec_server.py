"""The exec server: sandbox commands over NATS request/reply, answered by the sandbox's
backend; every failure is a reply."""

from __future__ import annotations

import logging

from pydantic import BaseModel, TypeAdapter, ValidationError

from assay_schemas import (
    RPC_INLINE_BYTES,
    BlobCommand,
    ClaimDrive,
    SandboxCommand,
    SandboxReply,
    SandboxRequest,
)

from ..backends import ResidentUnavailable, SandboxLimitExceeded, SandboxNotFound, SandboxPathError
from ..commands import error_reply, run_command
from .sandboxes import Sandboxes

__all__ = ["ExecServer", "is_claim"]

log = logging.getLogger("assay.sandbox_manager")

_COMMAND: TypeAdapter[SandboxCommand] = TypeAdapter(SandboxCommand)
_REQUEST: TypeAdapter[SandboxRequest] = TypeAdapter(SandboxRequest)
_CLAIM_BYTES = 1024
"""A claim is far smaller; anything larger is answered in a command slot, as before."""


_CLAIM_OP: str = ClaimDrive.model_fields["op"].default


class _Op(BaseModel):
    op: str = ""


def is_claim(body: bytes) -> bool:
    """Whether a request is a drive's lease claim: answered at once, never behind the
    commands waiting for a slot (a renewal queued behind long commands would let a
    live drive's lease lapse, and a waiting drive take the run over)."""
    if len(body) > _CLAIM_BYTES:
        return False
    try:
        return _Op.model_validate_json(body).op == _CLAIM_OP
    except ValidationError:
        return False


class ExecServer(Sandboxes):
    """Answers the commands for the sandboxes this instance holds."""

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
        if sid in self._ended:
            # Its run ended: nothing more runs in it (see Sandboxes._quiesce). Asked before
            # ownership: a sandbox being destroyed is no longer owned, not yet destroyed.
            return error_reply(
                "destroyed", f"sandbox {sid}: its run ended; being destroyed on {self.instance}"
            )
        if sid not in self._owned:
            kind = "destroyed" if sid in self.destroyed else "not_found"
            return error_reply(
                kind,
                f"sandbox {sid}: {'destroyed' if kind == 'destroyed' else 'unknown'} on instance {self.instance}",
            )
        if isinstance(command, ClaimDrive):
            return await self._claim(sid, command.drive_id)
        refused = self._fence(sid, command.drive_id)
        if refused is not None:
            return refused
        await self._driven(sid)
        async with self._command(sid):
            answer = await self._run(sid, command)
        if sid in self._ended:  # stopped by its run's end: no step can log its output
            return error_reply("destroyed", f"sandbox {sid}: its run ended mid-command")
        if self._drives.get(sid) != command.drive_id:  # stopped by a takeover
            return error_reply("superseded", f"sandbox {sid}: taken over mid-command")
        return answer

    # --- the drive lease (the fence) -------------------------------------------------------

    async def _claim(self, sid: str, drive_id: str) -> bytes:
        """Grant the sandbox's lease to `drive_id` unless another drive holds it and has
        not been idle for the lease time (then `held`: the claimant waits). Taking over
        stops what the old holder left running, before the new one commands anything."""
        if not drive_id:
            return error_reply("superseded", f"sandbox {sid}: a claim must name its drive")
        holder = self._drives.get(sid)
        if holder not in (None, drive_id):
            idle = self._idle_s(sid)
            if idle <= self.drive_lease_s:
                return error_reply(
                    "held", f"sandbox {sid}: another drive holds it (idle {idle:.1f}s)"
                )
            log.warning(
                "sandbox %s: drive %s takes over from drive %s, idle %.1fs",
                sid,
                drive_id,
                holder,
                idle,
            )
        self._drives[sid] = drive_id
        self._busy(sid)
        await self._driven(sid)
        if holder not in (None, drive_id) and sid in self._running:
            await self._blocking(self.backends[self._owned[sid]].stop_commands, sid)
            async with self._quiet:
                await self._quiet.wait_for(lambda: sid not in self._running)
            self._busy(sid)
        return SandboxReply(ok=True, lease_s=self.drive_lease_s).model_dump_json().encode()

    def _fence(self, sid: str, drive_id: str) -> bytes | None:
        """Why a command may not run (`superseded`): it names no drive, or not the one
        holding the sandbox. A sandbox no drive holds (this instance restarted, keeping
        its sandboxes but not their leases) is held from then on by the drive commanding."""
        if not drive_id:
            return error_reply("superseded", f"sandbox {sid}: the command names no drive")
        if self._drives.setdefault(sid, drive_id) != drive_id:
            return error_reply(
                "superseded", f"sandbox {sid}: another drive took it over; this one stops"
            )
        return None

    async def _run(self, sid: str, command: SandboxCommand) -> bytes:
        """Run one command on the sandbox's backend; every failure is a reply."""
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
