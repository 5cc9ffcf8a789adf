"""The interface every sandbox backend implements."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from ..seal import SealCaps, SealCopy
from ._models import ExecResult, FileEntry, PythonResult, SandboxInfo, SandboxSpec

__all__ = ["SandboxBackend"]


@runtime_checkable
class SandboxBackend(Protocol):
    """Create, run commands in, read/write, copy out for a seal and destroy isolated sandboxes.

    Calls block (they spawn processes or talk to dockerd); async callers wrap them in
    ``asyncio.to_thread``. Paths are relative to /workspace or absolute under it.
    """

    name: str

    def create(self, spec: SandboxSpec, sandbox_id: str, labels: Mapping[str, str]) -> SandboxInfo:
        """Create a sandbox and return once commands can run in it."""
        ...

    def exec(
        self,
        sandbox_id: str,
        command: list[str] | str,
        *,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        """Run a command (a str runs via /bin/sh -c) and collect capped output."""
        ...

    def python(
        self,
        sandbox_id: str,
        code: str,
        *,
        timeout_s: float | None = None,
        reset: bool = False,
        kernel_id: str | None = None,
    ) -> PythonResult:
        """Run code in the sandbox's persistent Python kernel; a fresh kernel when reset,
        or when kernel_id is not the live kernel's (the result says why)."""
        ...

    def read_file(self, sandbox_id: str, path: str) -> bytes:
        """Read a regular file under /workspace (no symlink is followed)."""
        ...

    def write_file(self, sandbox_id: str, path: str, data: bytes) -> None:
        """Write a file under /workspace, creating parent directories."""
        ...

    def list_files(self, sandbox_id: str) -> list[FileEntry]:
        """List every entry under /workspace, symlinks unfollowed."""
        ...

    def copy_for_seal(self, sandbox_id: str, caps: SealCaps) -> SealCopy:
        """Measure /workspace against the caps (reading no contents), then copy only what
        fits, each file bounded by its measured size, to a host directory that outlives the
        sandbox."""
        ...

    def stop_commands(self, sandbox_id: str) -> None:
        """Kill whatever runs in the sandbox now (its files stay, for the seal)."""
        ...

    def destroy(self, sandbox_id: str) -> None:
        """Kill everything in the sandbox and free its resources (idempotent for orphans)."""
        ...

    def list_live(self) -> list[SandboxInfo]:
        """Every sandbox this backend still holds, including those of a previous process."""
        ...
