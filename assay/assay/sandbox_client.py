"""Client of the sandbox-manager's exec RPC (core NATS request-reply): what the runner holds."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from assay.bus import Bus
from assay.store import BlobStore
from assay_schemas import (
    RPC_INLINE_BYTES,
    AssayError,
    BlobCommand,
    ClaimDrive,
    ExecCommand,
    ExecOutcome,
    ListedFile,
    ListFiles,
    NoResponders,
    PythonOutcome,
    ReadFile,
    RunFault,
    RunPython,
    SandboxCommand,
    SandboxError,
    SandboxReply,
    Superseded,
    WriteFile,
    b64,
    unb64,
)

__all__ = ["DriveHeld", "DriveSuperseded", "SandboxClient", "SandboxGone"]


class SandboxGone(SandboxError, RunFault):
    """The sandbox (or the instance holding it) no longer exists: the platform's failure."""

    def flat(self) -> str:
        """What a run ended by it says: the sandbox disappeared, and which."""
        return f"sandbox disappeared: {self}"


class DriveHeld(AssayError):
    """A claim refused: another drive holds the sandbox's lease and is at work in it."""


class DriveSuperseded(Superseded):
    """A command refused: this drive no longer holds the sandbox's lease (another drive
    took it over after this one stalled past the lease time). The drive stops, publishing
    nothing; the drive holding the lease finishes the run."""


@dataclass(frozen=True, kw_only=True)
class SandboxClient:
    """Commands to one sandbox over core NATS request-reply, all from one drive."""

    bus: Bus
    instance: str
    sandbox_id: str
    drive_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    """The fencing token every command carries: the manager runs only the commands of the
    drive holding the sandbox's lease (`claim`); a fresh one per drive."""
    margin_s: float = 10.0
    """Extra time beyond a command's own timeout before the request is abandoned."""
    restart_grace_s: float = 30.0
    """How long an instance with no responders may take to come back (a restart keeps its
    live sandboxes) before its sandbox is declared gone."""
    store: BlobStore | None = None
    """The blob store shared with the sandbox manager: commands and replies too large for
    one NATS message travel through it."""

    async def _send(self, command: SandboxCommand, timeout: float) -> SandboxReply:
        subject = self.bus.subjects.rpc("sandbox", self.instance)
        body = await self._body(command)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.restart_grace_s
        while True:
            try:
                raw = await self.bus.request(subject, body, timeout=timeout)
                break
            except NoResponders as e:
                # Nobody serves the instance: it is restarting (a restart keeps its live
                # sandboxes) or gone. Any other BusError (no reply in time, a lost
                # connection) propagates: the instance died mid-command, its resident and
                # the command with it (a live one answers a command that timed out by its
                # timeout plus the resident's grace, well within the margin). Not the
                # agent's tool error: it fails the handler, and the redelivered run resumes
                # from its logged steps; a run that fails on every delivery is given up with
                # a RunFailed (the runner's `on_run_given_up`).
                if loop.time() >= deadline:
                    raise SandboxGone(
                        f"sandbox {self.sandbox_id}: instance {self.instance} is not running"
                    ) from e
                await asyncio.sleep(0.5)
        reply = SandboxReply.model_validate_json(raw)
        if reply.reply_blob is not None:
            reply = SandboxReply.model_validate_json(await self._blob(reply.reply_blob))
        if reply.ok:
            return reply
        if reply.error_kind == "superseded":
            raise DriveSuperseded(reply.error)
        if reply.error_kind == "held":
            raise DriveHeld(reply.error)
        if reply.error_kind in {"not_found", "destroyed", "broken"}:
            # The sandbox is gone or cannot run anything: the platform's failure.
            raise SandboxGone(reply.error)
        raise SandboxError(reply.error)

    async def _body(self, command: SandboxCommand) -> bytes:
        """The command as one NATS message: inline when small, else by reference to a blob."""
        body = command.model_dump_json().encode()
        if len(body) <= RPC_INLINE_BYTES:
            return body
        if self.store is None:
            raise SandboxError(
                f"sandbox {self.sandbox_id}: a {len(body)}-byte command needs a blob store"
            )
        info = await asyncio.to_thread(self.store.put_bytes, body)
        ref = BlobCommand(sandbox_id=self.sandbox_id, sha256=info.sha256)
        return ref.model_dump_json().encode()

    async def _blob(self, sha256: str) -> bytes:
        if self.store is None:
            raise SandboxError(
                f"sandbox {self.sandbox_id}: the reply is a blob and no store is set"
            )
        return await asyncio.to_thread(self.store.get_bytes, sha256)

    async def exec(
        self,
        command: list[str] | str,
        *,
        timeout_s: float,
        stdin: bytes | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecOutcome:
        """Run a command in the sandbox."""
        cmd = ExecCommand(
            sandbox_id=self.sandbox_id,
            drive_id=self.drive_id,
            command=command,
            timeout_s=timeout_s,
            stdin_b64=b64(stdin) if stdin is not None else None,
            env=env or {},
            cwd=cwd,
        )
        reply = await self._send(cmd, timeout_s + self.margin_s)
        assert reply.exec is not None
        return reply.exec

    async def python(
        self, code: str, *, timeout_s: float, kernel_id: str | None, reset: bool = False
    ) -> PythonOutcome:
        """Run a cell in the sandbox's Python kernel (see RunPython)."""
        cmd = RunPython(
            sandbox_id=self.sandbox_id,
            drive_id=self.drive_id,
            code=code,
            timeout_s=timeout_s,
            kernel_id=kernel_id,
            reset=reset,
        )
        reply = await self._send(cmd, timeout_s + self.margin_s)
        assert reply.python is not None
        return reply.python

    async def read_file(self, path: str) -> bytes:
        """Read a workspace file."""
        reply = await self._send(
            ReadFile(sandbox_id=self.sandbox_id, drive_id=self.drive_id, path=path),
            self.margin_s * 3,
        )
        return unb64(reply.data_b64 or "")

    async def write_file(self, path: str, data: bytes) -> None:
        """Write a workspace file."""
        await self._send(
            WriteFile(
                sandbox_id=self.sandbox_id, drive_id=self.drive_id, path=path, data_b64=b64(data)
            ),
            self.margin_s * 3,
        )

    async def list_files(self) -> list[ListedFile]:
        """List the workspace."""
        command = ListFiles(sandbox_id=self.sandbox_id, drive_id=self.drive_id)
        reply = await self._send(command, self.margin_s * 3)
        return list(reply.files or [])

    async def claim(self) -> float:
        """Take (or renew) the sandbox's lease for this drive, and return the lease time
        to renew it within; raises DriveHeld while another drive holds it and is at work
        (see ClaimDrive)."""
        command = ClaimDrive(sandbox_id=self.sandbox_id, drive_id=self.drive_id)
        reply = await self._send(command, self.margin_s * 3)
        return reply.lease_s or 15.0
