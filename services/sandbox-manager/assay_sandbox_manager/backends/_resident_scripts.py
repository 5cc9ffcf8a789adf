"""The resident's files, copied into each sandbox's host folder (mounted read-only at
RESIDENT_DIR, see _resident.py) with the bytecode of the modules it imports."""

from __future__ import annotations

import functools
import importlib.util
import py_compile
import shutil
import tempfile
from pathlib import Path

__all__ = ["install_scripts"]

_SCRIPTS = {
    "resident.py": "_resident_entry_inside.py",
    "resident_serve.py": "_resident_inside.py",
    "resident_wire.py": "_resident_wire_inside.py",
    "kernel.py": "_kernel_inside.py",
    "gateway.py": "_gateway_inside.py",
}
_MODULES = ("resident_serve.py", "resident_wire.py", "gateway.py")
"""Imported by the resident: their bytecode is cached beside them (see install_scripts)."""


def install_scripts(mount: Path) -> Path:
    """Copy the resident's scripts into a sandbox's host folder; returns the folder to
    mount read-only at RESIDENT_DIR.

    The modules the resident imports get their bytecode beside them, in __pycache__ under
    this Python's tag: a sandbox whose python3 has the same version loads it instead of
    compiling the source at every start (the resident's largest cost after the
    interpreter's own start); another version ignores it and compiles, as before.
    """
    folder = mount / "resident"
    folder.mkdir(mode=0o755, exist_ok=True)
    for name, source in _SCRIPTS.items():
        target = folder / name
        if not target.exists():
            shutil.copyfile(Path(__file__).with_name(source), target)
            target.chmod(0o444)
    for name in _MODULES:
        cached = Path(importlib.util.cache_from_source(str(folder / name)))
        if not cached.exists():
            cached.parent.mkdir(mode=0o755, exist_ok=True)
            cached.write_bytes(_bytecode(_SCRIPTS[name]))
            cached.chmod(0o444)
    return folder


@functools.cache
def _bytecode(source: str) -> bytes:
    """A module's .pyc, compiled once per process: unchecked-hash, so that it holds for
    every copy of the source (each with its own mtime) without a check at each start."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "module.pyc"
        py_compile.compile(
            str(Path(__file__).with_name(source)),
            cfile=str(out),
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        return out.read_bytes()
