"""Typed values passed to and returned by sandbox backends."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict

from assay_schemas import SandboxSpec

__all__ = ["ExecResult", "FileEntry", "PythonResult", "SandboxInfo", "SandboxSpec"]


class ExecResult(BaseModel):
    """Outcome of one command run in a sandbox."""

    model_config = ConfigDict(frozen=True)

    exit_code: int
    """Exit status; 128+N when killed by signal N (shell convention, both backends)."""
    stdout: bytes
    """Captured stdout, capped; ends with the truncation marker when capped."""
    stderr: bytes
    """Captured stderr, capped; ends with the truncation marker when capped."""
    timed_out: bool
    """The wall-clock timeout fired and the process tree was killed."""
    stdout_truncated: bool
    """stdout exceeded the cap."""
    stderr_truncated: bool
    """stderr exceeded the cap."""
    duration_ms: float
    """Wall-clock time of the exec as seen by the host."""
    limit: Literal["cpu", "file_size", "memory", "timeout"] | None = None
    """The resource limit that ended the command, where the backend can tell."""


class PythonResult(ExecResult):
    """Outcome of one cell in a sandbox's Python kernel."""

    kernel_id: str
    """The kernel that ran the cell ("" when it died); pass it back to keep its state."""
    restarted: str = ""
    """Why a fresh kernel ran this cell ("new", "reset", "timeout", "crashed", "killed"),
    or "" when the cell ran in the kernel named by the request."""
    figures: list[str] = []
    """Matplotlib figures the cell left open, saved under /workspace (relative paths)."""


class FileEntry(NamedTuple):
    """One entry under /workspace (path relative to it, os.fsdecode'd: surrogateescape)."""

    path: str
    kind: Literal["file", "dir", "symlink", "other"]
    size: int


class SandboxInfo(NamedTuple):
    """A live sandbox: the handle create() returns and list_live() lists."""

    sandbox_id: str
    backend: Literal["bubblewrap", "docker"]
    labels: dict[str, str]
    workspace: Path
    """Host directory mounted as /workspace (read it only through the backend)."""
