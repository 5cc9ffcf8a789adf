"""`assay-sandbox-manager` / `python -m assay_sandbox_manager`: the sandbox-manager service alone, until SIGINT/SIGTERM.

Settings come from ``ASSAY_*`` environment variables, as for `assay serve sandbox-manager`.
"""

from __future__ import annotations

import asyncio

from assay.config import Settings
from assay.service import run_until_signal
from assay.telemetry import setup_tracing, shutdown_telemetry

from .service import build


def main() -> None:
    """Run the service until a signal stops it."""
    settings = Settings()
    setup_tracing("assay-sandbox-manager")
    try:
        asyncio.run(run_until_signal([build(settings)]))
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    main()
