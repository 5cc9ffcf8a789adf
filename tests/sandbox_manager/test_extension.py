"""Runtime extensions: one build per package list, found again by its hash; a package
list cannot smuggle pip options, paths or URLs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from assay_sandbox_manager import extension
from assay_schemas import ProgramSpec


def test_the_hash_is_the_list_not_its_order() -> None:
    a = extension.extension_hash(["smolagents==1.26.0", "openai-agents"])
    assert a == extension.extension_hash(["openai-agents", "smolagents==1.26.0"])
    assert a != extension.extension_hash(["smolagents==1.25.0", "openai-agents"])


def test_a_cached_extension_is_not_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_SANDBOX_CACHE", str(tmp_path))
    folder = tmp_path / f"ext-{extension.extension_hash(['pkg'])}"
    (folder / "assay-ext").mkdir(parents=True)
    (folder / ".assay-extension-complete").write_text("[]\n")

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("a cached extension was rebuilt")

    monkeypatch.setattr(extension, "_build", no_build)
    assert extension.ensure_extension(["pkg"]) == folder


@pytest.mark.parametrize(
    "requirement",
    [
        "--index-url=http://evil.example/simple",
        "-r/etc/passwd",
        "./local-folder",
        "pkg @ https://evil.example/pkg.whl",
        "pkg; os_name == 'posix'",
    ],
)
def test_a_requirement_is_a_name_never_an_option_path_or_url(requirement: str) -> None:
    with pytest.raises(ValidationError):
        ProgramSpec(command=["true"], packages=[requirement])


def test_scripts_are_pointed_at_the_sandbox_python(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_bytes(b"#!/work/main/.venv/bin/python\nprint('hi')\n")
    extension._point_scripts_at_sandbox_python(tmp_path)
    assert script.read_bytes() == b"#!/usr/bin/python3\nprint('hi')\n"
