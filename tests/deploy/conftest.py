"""Deploy fixtures: the images, built once per session (each cached by its input hash)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ._files import DEPLOY

# Service image -> third-party packages it must not carry (they belong to other services).
FOREIGN = {
    "assay-runner": {"docker", "polars", "scipy"},
    "assay-sandbox-manager": {"openai", "anthropic", "polars", "scipy"},
    "assay-judge": {"docker", "scipy"},
    "assay-aggregator": {"openai", "anthropic", "docker"},
}


def build_images() -> subprocess.CompletedProcess[str]:
    """Run deploy/build-images.sh; earlier tags are kept (other tests may still use them)."""
    return subprocess.run(
        ["bash", str(DEPLOY / "build-images.sh")],
        capture_output=True,
        text=True,
        timeout=840,
        # The pins come from the Python that runs the tests (a checkout without .venv/
        # would otherwise pin the system Python's packages and rebuild every image).
        env={"PYTHON": sys.executable, **os.environ, "ASSAY_IMAGE_KEEP": "1"},
    )


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def container_logs(name: str) -> str:
    out = docker("logs", name)
    return (out.stdout + out.stderr)[-3000:]


@pytest.fixture(scope="session")
def images() -> dict[str, str]:
    """Image name -> IMAGE:<version>-<input hash>, each built unless that tag exists."""
    if docker("info", timeout=30).returncode != 0:
        pytest.fail("docker tests need a running dockerd (or deselect -m 'not docker')")
    out = build_images()
    assert out.returncode == 0, out.stderr[-4000:]
    tags = {tag.split(":")[0]: tag for tag in out.stdout.split()}
    assert set(tags) == {"assay", *FOREIGN}, out.stdout
    return tags
