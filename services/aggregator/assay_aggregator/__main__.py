"""`assay-aggregator` / `python -m assay_aggregator`: the aggregator service alone, until SIGINT/SIGTERM.

Settings come from ``ASSAY_*`` environment variables, as for `assay serve aggregator`.
"""

from __future__ import annotations

import asyncio

from assay.config import Settings
from assay.service import run_until_signal
from assay.store import open_store
from assay.telemetry import setup_tracing, shutdown_telemetry

from .service import build


def main() -> None:
    """Run the service until a signal stops it."""
    settings = Settings()
    setup_tracing("assay-aggregator")
    try:
        asyncio.run(run_until_signal([build(settings, store=open_store(settings))]))
    finally:
        shutdown_telemetry()


if __name__ == "__main__":
    main()
