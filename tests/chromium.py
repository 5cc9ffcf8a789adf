"""Headless Chromium with the flags this sandboxed machine needs (the report's screenshot,
the viewer's pages)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def headless_chromium(url: str, tmp: Path, *extra: str) -> str:
    """Open `url` in headless Chromium (profile under `tmp`) with the `extra` flags; its
    standard output."""
    chromium = shutil.which("chromium")
    assert chromium, "chromium is installed by .ci/run (apt-get install chromium)"
    out = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp / 'chromium'}",
            "--hide-scrollbars",
            "--window-size=1280,900",
            *extra,
            url,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out.stdout
