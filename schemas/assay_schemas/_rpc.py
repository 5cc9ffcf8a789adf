"""Requests that are not facts: sandbox operations over core NATS request-reply."""

from __future__ import annotations

import base64
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "RPC_INLINE_BYTES",
    "BlobCommand",
    "ClaimDrive",
    "ExecCommand",
    "ExecOutcome",
    "ListFiles",
    "ListedFile",
    "PythonOutcome",
    "ReadFile",
    "RunPython",
    "SandboxCommand",
    "SandboxReply",
    "SandboxRequest",
    "WriteFile",
    "b64",
    "unb64",
]


def b64(data: bytes) -> str:
    """Bytes as base64 text (command payloads are JSON)."""
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    """Inverse of b64."""
    return base64.b64decode(text.encode("ascii"))


class _Command(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    sandbox_id: str


class _DriveCommand(_Command):
    drive_id: str = ""
    """The drive sending it (one handling of a run's SandboxReady by a runner): the
    sandbox-manager refuses, as `superseded`, a command from any drive but the one holding
    the sandbox's lease (see `ClaimDrive`); "" names none and is refused the same."""


class ClaimDrive(_DriveCommand):
    """Claim the sandbox's lease for `drive_id`, the fencing token every later command
    carries.

    Granted when no drive holds the sandbox, when `drive_id` holds it already (a
    renewal: the holder claims again every third of the lease while it drives), or when
    its holder has neither claimed nor started or ended a command for longer than the
    manager's lease time: a drive that died, or stalled past it, is taken over, the
    commands it left running are stopped, and its next command is refused. Otherwise
    refused as `held`: the caller waits."""

    op: Literal["claim"] = "claim"


class ExecCommand(_DriveCommand):
    """Run a command in a sandbox (a string runs through /bin/sh -c)."""

    op: Literal["exec"] = "exec"
    command: list[str] | str
    timeout_s: float | None = None
    stdin_b64: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None


class RunPython(_DriveCommand):
    """Run a cell in the sandbox's persistent Python kernel.

    The kernel named by kernel_id keeps its globals; with reset, or when kernel_id is not
    the live kernel's (None: the caller knows none), a fresh kernel runs the cell.
    """

    op: Literal["python"] = "python"
    code: str
    timeout_s: float | None = None
    reset: bool = False
    kernel_id: str | None = None


class ReadFile(_DriveCommand):
    """Read a file under /workspace."""

    op: Literal["read"] = "read"
    path: str


class WriteFile(_DriveCommand):
    """Write a file under /workspace."""

    op: Literal["write"] = "write"
    path: str
    data_b64: str


class ListFiles(_DriveCommand):
    """List /workspace."""

    op: Literal["list"] = "list"


class BlobCommand(_Command):
    """A command too large for one NATS message: its JSON is the blob ``sha256``."""

    op: Literal["blob"] = "blob"
    sha256: str


RPC_INLINE_BYTES = 256 * 1024
"""Commands and replies larger than this, encoded, travel through the blob store (NATS
refuses messages over its max payload, 1 MiB by default)."""

SandboxCommand = Annotated[
    ExecCommand | RunPython | ReadFile | WriteFile | ListFiles | ClaimDrive,
    Field(discriminator="op"),
]
SandboxRequest = Annotated[
    ExecCommand | RunPython | ReadFile | WriteFile | ListFiles | ClaimDrive | BlobCommand,
    Field(discriminator="op"),
]
"""What arrives on the wire: a command, or a reference to one in the blob store."""


class ExecOutcome(BaseModel):
    """What a command did."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    exit_code: int
    stdout_b64: str
    stderr_b64: str
    timed_out: bool = False
    truncated: bool = False
    limit: str | None = None
    duration_ms: float = Field(default=0.0, ge=0, allow_inf_nan=False)


class PythonOutcome(ExecOutcome):
    """What a Python cell did, and in which kernel."""

    kernel_id: str = ""
    """The kernel to name in the next cell to keep its state ("" if it died)."""
    restarted: str = ""
    """Why a fresh kernel ran the cell: new, reset, timeout, crashed, killed; "" if none."""
    figures: list[str] = Field(default_factory=list)
    """Figures the cell left open, saved as files under /workspace."""


class ListedFile(BaseModel):
    """One workspace entry."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    kind: str
    size: int = Field(ge=0)


class SandboxReply(BaseModel):
    """Reply to any sandbox command: a result or an error naming the sandbox."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    error: str = ""
    error_kind: Literal[
        "",
        "not_found",
        "destroyed",
        "broken",
        "path",
        "limit",
        "internal",
        "held",
        "superseded",
    ] = ""
    """Why it failed; `held`: a claim refused, another drive holds the sandbox;
    `superseded`: a command from a drive that does not hold it."""
    exec: ExecOutcome | None = None
    python: PythonOutcome | None = None
    data_b64: str | None = None
    files: list[ListedFile] | None = None
    lease_s: float | None = None
    """A granted claim: the lease time, within which the holder claims again."""
    reply_blob: str | None = None
    """The whole reply is this blob (it was over RPC_INLINE_BYTES); nothing else is set."""
