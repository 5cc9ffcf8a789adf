"""Messages through nats-server per connection, read from its monitoring endpoint (/connz).

Each service holds one named connection (``assay-<service>``); what it published is the
connection's ``in_msgs``, what the server delivered to it its ``out_msgs``. Two readings
taken around a run give each service's messages per agent step: the figure that says
how many hops a step costs, which is what the platform's CPU per step follows.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

__all__ = ["Flow", "flows", "per_step", "read_connz", "read_varz"]

_CONNZ_LIMIT = 4096
"""More connections than any bench makes; /connz pages at 1,024 by default."""


class Flow(NamedTuple):
    """One connection's messages: published to the server, delivered by it."""

    published: int
    delivered: int

    def since(self, earlier: Flow) -> Flow:
        """What moved between `earlier` and this reading."""
        return Flow(self.published - earlier.published, self.delivered - earlier.delivered)


def flows(connz: Mapping[str, Any], names: Iterable[str]) -> dict[str, Flow]:
    """Each named connection's flow in a /connz answer, summed over connections that share
    a name (a reconnect shows as a second one); a name with none is left out."""
    wanted = set(names)
    out: dict[str, Flow] = {}
    for conn in connz.get("connections") or []:
        name = conn.get("name", "")
        if name in wanted:
            seen = out.get(name, Flow(0, 0))
            out[name] = Flow(
                seen.published + int(conn.get("in_msgs", 0)),
                seen.delivered + int(conn.get("out_msgs", 0)),
            )
    return out


def _monitor(monitor_url: str, path: str, timeout_s: float) -> dict[str, Any]:
    """One JSON answer of the server's monitoring endpoint (loopback only)."""
    with urllib.request.urlopen(f"{monitor_url.rstrip('/')}{path}", timeout=timeout_s) as answer:
        data: dict[str, Any] = json.load(answer)
    return data


def read_connz(monitor_url: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """The server's /connz answer (every open connection)."""
    return _monitor(monitor_url, f"/connz?limit={_CONNZ_LIMIT}", timeout_s)


def read_varz(monitor_url: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """The server's /varz answer (its configuration and counters, `gomaxprocs` among them)."""
    return _monitor(monitor_url, "/varz", timeout_s)


def per_step(
    before: Mapping[str, Flow], after: Mapping[str, Flow], steps: int
) -> dict[str, tuple[float, float]]:
    """(published, delivered) per step of each connection read both times."""
    n = max(1, steps)
    moved = {name: flow.since(before[name]) for name, flow in after.items() if name in before}
    return {name: (m.published / n, m.delivered / n) for name, m in moved.items()}
