"""The embedded nats-server's Go runtime: as many processors as its share of the host."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from assay.embedded import NatsServer, find_free_port, go_procs


def _varz(monitor: int) -> dict[str, Any]:
    """The server's /varz answer (its configuration and counters) from its monitor port."""
    with urllib.request.urlopen(f"http://127.0.0.1:{monitor}/varz", timeout=5.0) as answer:
        data: dict[str, Any] = json.load(answer)
    return data


@pytest.mark.parametrize(
    ("cores", "procs"), [(1, 1), (2, 1), (3, 1), (4, 1), (7, 1), (8, 2), (16, 4), (64, 16)]
)
def test_one_go_processor_per_four_cores_and_never_none(cores: int, procs: int) -> None:
    assert go_procs(cores) == procs


def test_the_server_runs_with_its_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOMAXPROCS", raising=False)
    monitor = find_free_port("127.0.0.1")
    with NatsServer(tmp_path / "nats", extra_args=("-m", str(monitor))):
        assert _varz(monitor)["gomaxprocs"] == go_procs()


def test_the_operators_setting_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOMAXPROCS", "3")
    monitor = find_free_port("127.0.0.1")
    with NatsServer(tmp_path / "nats", extra_args=("-m", str(monitor))):
        assert _varz(monitor)["gomaxprocs"] == 3
