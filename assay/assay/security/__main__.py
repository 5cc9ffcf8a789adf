"""`python -m assay.security FOLDER`: write the cluster's nats-server configs."""

from __future__ import annotations

import sys
from pathlib import Path

from ._deploy import write_deploy_configs


def main(argv: list[str]) -> int:
    """Write the configs into the folder given (default `deploy/nats`)."""
    folder = Path(argv[0]) if argv else Path("deploy/nats")
    for path in write_deploy_configs(folder):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
