"""Fixtures: one scripted model server per session; a fresh model name per test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from assay_testing.scripted import ScriptedModelServer

_names = itertools.count()


@pytest.fixture(scope="session")
def server() -> Iterator[ScriptedModelServer]:
    """A real loopback HTTP server, started once."""
    with ScriptedModelServer(prompt_cache=True) as srv:
        yield srv


@pytest.fixture
def model() -> str:
    """A model name no other test uses, so scripts and faults stay per test."""
    return f"scripted-srv-{next(_names)}"
