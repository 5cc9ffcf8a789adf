"""Fixtures of the fault suite: the session's scripted models, each test's campaign."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.config import Settings
from assay_testing.scripted import ScriptedModelServer

from .harness import Baseline, Cast, baseline


@pytest.fixture(scope="session")
def models() -> Iterator[ScriptedModelServer]:
    """The campaign's scripted models, one server for the session (same URLs in every log)."""
    with Cast.models() as server:
        yield server


@pytest.fixture
def cast(models: ScriptedModelServer, tmp_path: Path) -> Iterator[Cast]:
    """This test's copy of the campaign; faults injected into the models are healed after."""
    yield Cast.write(models, tmp_path / "cast")
    for model in ("m-careful", "m-overclaimer", "m-judge"):
        models.heal(model)


@pytest.fixture
async def base(
    settings: Settings, models: ScriptedModelServer, tmp_path_factory: pytest.TempPathFactory
) -> Baseline:
    """The undisturbed run of the campaign (made by the first test that asks, then cached)."""
    return await baseline(settings, models, tmp_path_factory.mktemp("baseline"))
