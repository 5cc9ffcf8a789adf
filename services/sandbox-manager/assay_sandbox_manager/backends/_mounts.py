"""Host folders a program agent's sandbox binds read-only, checked the same on both backends:
the run's model gateway folder, its runtime extension and its bundle."""

from __future__ import annotations

import subprocess
from pathlib import Path

from assay.bundle import BUNDLE_MOUNT
from assay_schemas import GATEWAY_MOUNT

from ..bundles import bundle_folder, is_unpacked
from ..extension import EXTENSION_MOUNT, ExtensionBuildFailed, ensure_extension
from ._errors import SandboxError
from ._hostdirs import check_traversable
from ._models import SandboxSpec

__all__ = ["GATEWAY_MOUNT", "extension_folder", "gateway_folder", "opt_binds"]


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


def opt_binds(sandbox_id: str, spec: SandboxSpec, *, foreign_uid: bool) -> dict[str, Path]:
    """Read-only binds under /opt (mount point to host folder): extension and bundle."""
    binds = {}
    extension = extension_folder(sandbox_id, spec, foreign_uid=foreign_uid)
    if extension is not None:
        binds[EXTENSION_MOUNT] = extension / "assay-ext"
    if spec.bundle_sha256 is not None:
        # Unpacked by the service before create (it has the blob store; backends do not).
        if not is_unpacked(spec.bundle_sha256):
            raise SandboxError(f"sandbox {sandbox_id}: bundle {spec.bundle_sha256} not unpacked")
        binds[BUNDLE_MOUNT] = bundle_folder(spec.bundle_sha256)
        if foreign_uid:
            check_traversable(sandbox_id, binds[BUNDLE_MOUNT])
    return binds
