"""Typed values passed to and returned by sandbox backends."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ExecResult", "FileEntry", "SandboxInfo", "SandboxSpec"]


class SandboxSpec(BaseModel):
    """Limits and runtime of one sandbox; the same spec behaves alike on both backends."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["bubblewrap", "docker"] = "bubblewrap"
    """Which backend runs the sandbox."""
    cpu_seconds: int = Field(default=600, gt=0)
    """CPU time per process (RLIMIT_CPU); the process gets SIGXCPU/SIGKILL beyond it."""
    cpus: float = Field(default=1.0, gt=0)
    """CPU share (Docker nano_cpus); bubblewrap has no cgroup and ignores it."""
    memory_mb: int = Field(default=2048, gt=0)
    """Memory cap: address space (RLIMIT_AS) on bubblewrap, cgroup mem_limit on Docker."""
    max_processes: int = Field(default=256, gt=0)
    """Process/thread cap (RLIMIT_NPROC per sandbox uid; Docker pids_limit)."""
    file_size_mb: int = Field(default=512, gt=0)
    """Largest single file a process may write (RLIMIT_FSIZE)."""
    disk_mb: int = Field(default=1024, gt=0)
    """Size of the sandbox's writable filesystem (/workspace and /tmp together)."""
    exec_timeout_s: float = Field(default=600.0, gt=0)
    """Default wall-clock limit of one exec; the whole process tree is killed past it."""
    output_cap_bytes: int = Field(default=1_000_000, ge=0)
    """Per-stream cap on captured stdout/stderr; the rest is dropped and marked."""
    image: str = "assay-sandbox:latest"
    """Docker image tag (the imported runtime rootfs)."""
    rootfs: Path | None = None
    """Bubblewrap root filesystem; None means the cached runtime rootfs of this recipe."""


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
