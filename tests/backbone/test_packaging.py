"""Each folder is a real package: importable without hooks, and installable on its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# import name -> (folder, distribution, modules it must NOT pull in when installed alone)
PACKAGES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "assay_schemas": ("schemas", "assay-schemas", ("nats", "faststream", "docker", "openai")),
    "assay": (
        "assay",
        "assay",
        ("docker", "openai", "anthropic", "polars", "boto3", "typer", "rich"),
    ),
    "assay_report": ("report", "assay-report", ("docker", "openai", "typer")),
    "assay_runner": ("services/runner", "assay-runner", ("docker", "polars")),
    "assay_sandbox_manager": (
        "services/sandbox-manager",
        "assay-sandbox-manager",
        ("openai", "anthropic", "polars"),
    ),
    "assay_judge": ("services/judge", "assay-judge", ("docker",)),
    "assay_aggregator": ("services/aggregator", "assay-aggregator", ("docker", "openai")),
    "assay_viewer": ("viewer", "assay-viewer", ("docker", "openai")),
    "assay_testing": ("testing", "assay-testing", ("typer",)),
    # Above the services: it drives all of them, so nothing is foreign to it.
    "assay_cli": ("cli", "assay-cli", ()),
}
TESTING_DEPS = (
    "schemas",
    "assay",
    "report",
    "services/runner",
    "services/sandbox-manager",
    "services/judge",
)
"""The testing parts stand on the services they start; the CLI on these and the rest."""
# What each distribution needs from this repository besides itself.
LOCAL_DEPS = {
    "assay-schemas": (),
    "assay": ("schemas",),
    "assay-report": ("schemas", "assay"),
    "assay-runner": ("schemas", "assay"),
    "assay-sandbox-manager": ("schemas", "assay"),
    "assay-judge": ("schemas", "assay"),
    "assay-aggregator": ("schemas", "assay", "report"),
    "assay-viewer": ("schemas", "assay", "report", "services/aggregator"),
    "assay-testing": TESTING_DEPS,
    "assay-cli": (*TESTING_DEPS, "services/aggregator", "viewer", "testing"),
}


def _python(code: str, python: str = sys.executable) -> str:
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd="/", check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("name", PACKAGES)
def test_each_package_imports_from_its_own_folder(name: str) -> None:
    folder = PACKAGES[name][0]
    path = _python(f"import {name} as m; print(m.__file__)")
    assert Path(path).resolve() == (ROOT / folder / name / "__init__.py").resolve()


def test_editable_installs_are_plain_paths_not_import_hooks() -> None:
    """Static tools (mypy, IDEs) follow a path on sys.path; they never run an import hook."""
    finders = _python("import sys; print([type(f).__module__ for f in sys.meta_path])")
    assert "editable" not in finders, finders
    paths = _python("import sys; print(sys.path)")
    for name, (folder, _, _) in PACKAGES.items():
        assert str(ROOT / folder) in paths, f"{name}: {folder} not on sys.path"


def test_each_service_registers_its_factory() -> None:
    from assay.service import service_names

    assert set(service_names()) >= {
        "runner",
        "sandbox-manager",
        "judge",
        "rules",
        "jury",
        "aggregator",
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", PACKAGES)
def test_each_package_installs_alone_in_an_empty_venv(name: str, tmp_path: Path) -> None:
    """Only the package, its local dependencies and its own third-party ones get installed."""
    folder, dist, absent = PACKAGES[name]
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    # uv trusts its own certificate list unless told to use the system's, which is where a
    # machine behind a TLS-inspecting proxy keeps that proxy's certificate.
    env = {**os.environ, "UV_NATIVE_TLS": "1"}
    wheels = tmp_path / "wheels"
    for source in (*LOCAL_DEPS[dist], folder):
        subprocess.run(
            [uv, "build", "--wheel", "--quiet", "-o", str(wheels), str(ROOT / source)],
            check=True,
            capture_output=True,
            env=env,
        )
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", python, "--find-links", str(wheels), dist],
        check=True,
        capture_output=True,
        env=env,
    )
    where = _python(f"import {name} as m; print(m.__file__)", python)
    assert where.startswith(str(venv)), where
    missing = _python(
        "import importlib.util as u; "
        f"print([m for m in {list(absent)!r} if u.find_spec(m) is not None])",
        python,
    )
    assert missing == "[]", f"{dist} pulled in {missing}"
