"""Errors raised by sandbox backends.

The tree (``SandboxError`` is the one in the project-wide ``AssayError`` tree)::

    SandboxError
    ├── SandboxNotFound            no live sandbox with that id
    ├── SandboxExists              create() with an id that is already live
    ├── SandboxPathError           a path leaves /workspace or names no regular file
    ├── SandboxLimitExceeded       a quota or cap refused the request (disk, file size)
    └── SandboxBackendUnavailable  bwrap/dockerd/rootfs/image missing or broken

Every message names the sandbox id.
"""

from __future__ import annotations

__all__ = [
    "SandboxBackendUnavailable",
    "SandboxError",
    "SandboxExists",
    "SandboxLimitExceeded",
    "SandboxNotFound",
    "SandboxPathError",
]


# One class, not a namesake: the base is the tree's SandboxError itself.
from assay_schemas import SandboxError


class SandboxNotFound(SandboxError):
    """No live sandbox has this id."""


class SandboxExists(SandboxError):
    """A sandbox with this id is already live."""


class SandboxPathError(SandboxError):
    """A path escapes /workspace, or does not name what the call needs."""


class SandboxLimitExceeded(SandboxError):
    """A quota or cap refused the request."""


class SandboxBackendUnavailable(SandboxError):
    """The backend's machinery (bwrap, dockerd, rootfs, image) is missing or broken."""
