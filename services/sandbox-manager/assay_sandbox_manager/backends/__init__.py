"""Sandbox backends: one Protocol, a bubblewrap and a Docker implementation."""

from ..seal import SealCaps, SealCopy, SealPlan
from ._bubblewrap import BubblewrapBackend
from ._capture import truncation_marker
from ._docker import DockerBackend
from ._errors import (
    SandboxBackendUnavailable,
    SandboxError,
    SandboxExists,
    SandboxLimitExceeded,
    SandboxNotFound,
    SandboxPathError,
)
from ._models import ExecResult, FileEntry, PythonResult, SandboxInfo, SandboxSpec
from ._protocol import SandboxBackend
from ._resident import ResidentUnavailable

__all__ = [
    "BubblewrapBackend",
    "DockerBackend",
    "ExecResult",
    "FileEntry",
    "PythonResult",
    "ResidentUnavailable",
    "SandboxBackend",
    "SandboxBackendUnavailable",
    "SandboxError",
    "SandboxExists",
    "SandboxInfo",
    "SandboxLimitExceeded",
    "SandboxNotFound",
    "SandboxPathError",
    "SandboxSpec",
    "SealCaps",
    "SealCopy",
    "SealPlan",
    "truncation_marker",
]
