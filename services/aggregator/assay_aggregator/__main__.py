"""`assay-aggregator` / `python -m assay_aggregator`: the aggregator service alone, until SIGINT/SIGTERM."""

from assay.service import serve_alone


def main() -> None:
    """Run the service with settings from ``ASSAY_*`` (as `assay serve aggregator` does)."""
    serve_alone("aggregator")


if __name__ == "__main__":
    main()
