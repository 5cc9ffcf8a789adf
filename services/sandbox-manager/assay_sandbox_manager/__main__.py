"""`assay-sandbox-manager` / `python -m assay_sandbox_manager`: the sandbox-manager service alone, until SIGINT/SIGTERM."""

from assay.service import serve_alone


def main() -> None:
    """Run the service with settings from ``ASSAY_*`` (as `assay serve sandbox-manager` does)."""
    serve_alone("sandbox-manager")


if __name__ == "__main__":
    main()
