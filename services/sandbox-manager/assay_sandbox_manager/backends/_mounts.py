"""Host folders a program agent's sandbox binds read-only, checked the same on both backends:
the run's model gateway folder and its runtime extension."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ..extension import ExtensionBuildFailed, ensure_extension
from ._errors import SandboxError
from ._hostdirs import check_traversable
from ._models import SandboxSpec

__all__ = ["GATEWAY_MOUNT", "extension_folder", "gateway_folder"]

GATEWAY_MOUNT = "/run/gateway"
"""Where the gateway folder is bound; the resident forwards 127.0.0.1:18080 to its socket."""


def gateway_folder(sandbox_id: str, spec: SandboxSpec, *, foreign_uid: bool) -> Path | None:
    """The run's gateway folder, refused unless an absolute, real host folder (reachable by
    other uids when the sandbox runs as one)."""
    if spec.gateway_dir is None:
        return None
    folder = Path(spec.gateway_dir)
    if not folder.is_absolute() or folder.is_symlink() or not folder.is_dir():
        raise SandboxError(f"sandbox {sandbox_id}: gateway_dir {folder} is not a host folder")
    if foreign_uid:
        check_traversable(sandbox_id, folder)
    return folder


def extension_folder(sandbox_id: str, spec: SandboxSpec, *, foreign_uid: bool) -> Path | None:
    """The run's runtime extension folder (built now if new), to bind at EXTENSION_MOUNT."""
    if not spec.packages:
        return None
    try:
        folder = ensure_extension(spec.packages)
    except (ExtensionBuildFailed, OSError, subprocess.SubprocessError) as e:
        raise SandboxError(f"sandbox {sandbox_id}: {e}") from e
    if foreign_uid:
        check_traversable(sandbox_id, folder)
    return folder
