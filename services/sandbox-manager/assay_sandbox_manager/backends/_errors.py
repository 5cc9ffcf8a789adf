"""Errors raised by sandbox backends.

The tree (the lead re-parents ``SandboxError`` onto the project-wide ``AssayError``)::

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


from assay_schemas import SandboxError as _AssaySandboxError


class SandboxError(_AssaySandboxError):
    """Base of every sandbox backend error."""


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
