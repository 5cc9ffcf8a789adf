"""`assay-judge` / `python -m assay_judge`: the judge service alone, until SIGINT/SIGTERM. The judge spec comes from ``ASSAY_JUDGE_SPEC``. `assay-rules`: the rule judge alone. `assay-jury`: the judges of every campaign's spec."""

from assay.service import serve_alone


def main() -> None:
    """Run the service with settings from ``ASSAY_*`` (as `assay serve judge` does)."""
    serve_alone("judge")


def rules() -> None:
    """Run the rule judge with settings from ``ASSAY_*`` (as `assay serve rules` does)."""
    serve_alone("rules")


def jury() -> None:
    """Run the jury with settings from ``ASSAY_*`` (as `assay serve jury` does)."""
    serve_alone("jury")


if __name__ == "__main__":
    main()
