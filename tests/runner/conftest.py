"""Fixtures of the runner tests: the web stand-in on its loopback address."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.webstand import STAND_IN, WebStandIn


@pytest.fixture
def stand_in() -> Iterator[WebStandIn]:
    """A page and search server at `STAND_IN`, stopped after the test."""
    with WebStandIn(host=STAND_IN) as server:
        yield server
