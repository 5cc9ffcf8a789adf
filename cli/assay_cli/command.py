"""How to call `assay` in a printed command, so that it runs as printed."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

__all__ = ["assay_command"]


def assay_command(path: str | None = None) -> str:
    """`assay` as a command that runs as printed: the bare name when the PATH (`path`,
    default $PATH) finds this installation's script, else that script's full path
    (`make run` leaves `.venv/bin` off the PATH)."""
    # The venv's bin folder, not the interpreter it links to: that is where pip put `assay`.
    script = Path(sys.executable).parent / "assay"
    if not script.is_file():
        return f"{sys.executable} -m assay_cli"
    found = shutil.which("assay", path=path)
    if found is not None and Path(found).resolve() == script.resolve():
        return "assay"
    return str(script.absolute())
