"""The Python kernel's script, copied into each sandbox's host folder (mounted read-only at
RESIDENT_DIR, see _resident.py); the resident itself is a program in the rootfs."""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["install_scripts"]

_SCRIPTS = {"kernel.py": "_kernel_inside.py"}


def install_scripts(mount: Path) -> Path:
    """Copy the kernel's script into a sandbox's host folder; returns the folder to mount
    read-only at RESIDENT_DIR."""
    folder = mount / "resident"
    folder.mkdir(mode=0o755, exist_ok=True)
    for name, source in _SCRIPTS.items():
        target = folder / name
        if not target.exists():
            shutil.copyfile(Path(__file__).with_name(source), target)
            target.chmod(0o444)
    return folder
