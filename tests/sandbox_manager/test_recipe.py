"""The runtime's recipe hash: the build script and the resident's source, one key for both
the shell script and the service."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from assay_sandbox_manager.runtime import recipe_hash

RECIPE = Path(__file__).resolve().parents[2] / "deploy" / "sandbox"


def _script_hash(script: Path) -> str:
    out = subprocess.run(
        ["bash", str(script), "--hash"], check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def test_the_script_and_the_service_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASSAY_SANDBOX_RECIPE", raising=False)
    assert _script_hash(RECIPE / "build-rootfs.sh") == recipe_hash()


def test_an_edited_resident_is_a_new_runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = recipe_hash()
    for name in ("build-rootfs.sh", "resident.c", "spawn.c"):
        shutil.copyfile(RECIPE / name, tmp_path / name)
    with (tmp_path / "resident.c").open("a") as f:
        f.write("/* edited */\n")
    monkeypatch.setenv("ASSAY_SANDBOX_RECIPE", str(tmp_path / "build-rootfs.sh"))
    after = recipe_hash()
    assert after != before
    assert _script_hash(tmp_path / "build-rootfs.sh") == after
