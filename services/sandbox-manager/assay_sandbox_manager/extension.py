"""Runtime extensions: Python packages a program agent needs, on top of the sandbox runtime.

An extension is `pip install --target` of a package list, built once on the host into
<cache>/ext-<hash>/assay-ext and bound read-only at /opt/assay-ext in every
sandbox that asks for that list; PYTHONPATH and PATH inside point at it. The hash covers
the rootfs recipe hash, the Python version and the list itself: the sandbox's Python is
Debian bookworm's 3.11, and the host's build must be for the same version (checked).
Nothing of the rootfs recipe changes; an extension is an addition beside it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from assay_schemas import SandboxError

from .runtime import cache_entry, recipe_hash, sandbox_cache

__all__ = [
    "EXTENSION_ENV",
    "EXTENSION_MOUNT",
    "ExtensionBuildFailed",
    "ensure_extension",
    "extension_hash",
]

EXTENSION_MOUNT = "/opt/assay-ext"
"""Where an extension's packages (its folder's assay-ext) are bound."""
EXTENSION_ENV = {
    "PYTHONPATH": "/opt/assay-ext",
    "PATH": "/opt/assay-ext/bin:/usr/local/bin:/usr/bin:/bin",
}
_SANDBOX_PYTHON = (3, 11)
_BUILD = 2
"""The build procedure's version, in the hash: a changed procedure builds anew."""
_COMPLETE = ".assay-extension-complete"
_BUILD_TIMEOUT_S = 1800


class ExtensionBuildFailed(SandboxError):
    """pip could not build the extension (a bad name, no network, no wheel ...)."""


def extension_hash(packages: Sequence[str]) -> str:
    """The cache key of an extension: 16 hex of its recipe (runtime, Python, packages)."""
    recipe = {
        "rootfs": recipe_hash(),
        "python": list(_SANDBOX_PYTHON),
        "build": _BUILD,
        "packages": sorted(packages),
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def ensure_extension(packages: Sequence[str]) -> Path:
    """The extension's folder (its assay-ext to bind at EXTENSION_MOUNT), built unless cached."""
    folder = sandbox_cache() / f"ext-{extension_hash(packages)}"
    if (folder / _COMPLETE).is_file():
        return folder
    if sys.version_info[:2] != _SANDBOX_PYTHON:
        raise ExtensionBuildFailed(
            f"runtime extension: the host's Python {sys.version_info[:2]} cannot build for "
            f"the sandbox's {_SANDBOX_PYTHON}"
        )
    cache_entry(folder, _COMPLETE, lambda staging: _build(packages, staging))
    return folder


def _build(packages: Sequence[str], staging: Path) -> str:
    """pip install into the staging folder; the text of the completion marker back.

    pip compiles the bytecode here (3.11's, valid for the sandbox's 3.11): the sandbox
    cannot write it into the read-only folder, and would compile on every import.
    """
    target = staging / "assay-ext"
    argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-input",
        "--no-warn-script-location",
        "--target",
        str(target),
        "--",
        *packages,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=_BUILD_TIMEOUT_S)
    if done.returncode != 0:
        raise ExtensionBuildFailed(f"runtime extension {list(packages)}: {done.stderr[-2000:]}")
    _point_scripts_at_sandbox_python(target / "bin")
    return json.dumps(sorted(packages)) + "\n"


def _point_scripts_at_sandbox_python(bin_dir: Path) -> None:
    """pip wrote the host's interpreter into the console scripts; the sandbox has its own."""
    for script in bin_dir.glob("*") if bin_dir.is_dir() else ():
        data = script.read_bytes()
        if data.startswith(b"#!") and b"python" in data.split(b"\n", 1)[0]:
            script.write_bytes(b"#!/usr/bin/python3" + data[data.index(b"\n") :])
