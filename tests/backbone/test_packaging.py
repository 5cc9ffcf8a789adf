"""Each service folder is an importable package, editable and from a built wheel."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "assay.schemas": "schemas",
    "assay.runner": "services/runner",
    "assay.sandbox_manager": "services/sandbox-manager",
    "assay.judge": "services/judge",
    "assay.aggregator": "services/aggregator",
}


@pytest.mark.parametrize("name, folder", PACKAGES.items())
def test_editable_install_maps_folders_to_packages(name: str, folder: str) -> None:
    code = f"import {name} as m; print(m.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd="/", check=True
    )
    assert Path(out.stdout.strip()).resolve() == (ROOT / folder / "__init__.py").resolve()


@pytest.mark.slow
def test_built_wheel_contains_and_imports_every_package(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("assay-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "assay/sandbox_manager/__init__.py" in names
    assert "assay/schemas/json/Event.json" in names
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    code = (
        "; ".join(f"import {n}" for n in PACKAGES)
        + "; import assay.schemas as s; print(s.__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd="/",
        check=True,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip().startswith(str(target)), out.stdout
