"""The embedded nats-server's Go runtime: as many processors as its share of the host."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from assay.embedded import NatsServer, find_free_port, find_free_ports, go_procs
from assay.embedded._nats import QUIET_FROM


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


def test_free_ports_are_distinct_and_below_the_ephemeral_range() -> None:
    """A picked port is bound a moment later; one of the ephemeral range can meanwhile be
    given to an outgoing connection (a three-node cluster once failed to start, "port in
    use"). The picker takes them below that range, distinct, each free when picked."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = find_free_ports(9)
    assert len(set(ports)) == 9
    assert all(QUIET_FROM <= p < low for p in ports)
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))
    # A port in use is never picked.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", find_free_port()))
        taken = held.getsockname()[1]
        assert taken not in find_free_ports(200)
