"""`assay-runner` / `python -m assay_runner`: the runner service alone, until SIGINT/SIGTERM."""

from assay.service import serve_alone


def main() -> None:
    """Run the service with settings from ``ASSAY_*`` (as `assay serve runner` does)."""
    serve_alone("runner")


if __name__ == "__main__":
    main()
