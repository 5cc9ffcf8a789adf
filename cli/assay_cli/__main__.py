"""`python -m assay_cli` runs the CLI."""

from assay_cli import main

main()
