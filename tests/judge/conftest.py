"""Fixtures of the jury tests: one scripted model server, a blob store per test, and the
`judging` steps (campaign → judges → seal → wait) built on them."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_testing.scripted import ScriptedModelServer

from .cases import SCRIPTED_KEY, Judging

_names = itertools.count()


@pytest.fixture(scope="session")
def server() -> Iterator[ScriptedModelServer]:
    """A real loopback HTTP server speaking the OpenAI and Anthropic APIs."""
    os.environ[SCRIPTED_KEY] = "scripted"
    with ScriptedModelServer() as srv:
        yield srv


@pytest.fixture
def names() -> Iterator[str]:
    """Fresh model names, so scripts and limiters stay per test."""
    return (f"judge-model-{next(_names)}" for _ in itertools.count())


@pytest.fixture
def store(settings: Settings) -> LocalBlobStore:
    """This test's blob store."""
    return LocalBlobStore(settings.blob_dir)


@pytest.fixture
def judging(
    bus: Bus,
    settings: Settings,
    store: LocalBlobStore,
    server: ScriptedModelServer,
    names: Iterator[str],
) -> Judging:
    """This test's bus, store and scripted server, with the steps judge tests repeat."""
    return Judging(bus, settings, store, server, names)
