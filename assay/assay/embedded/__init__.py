"""The embedded stack: a local nats-server with JetStream, a local blob store."""

from ._nats import (
    NatsServer,
    PortInUse,
    find_free_port,
    find_free_ports,
    go_procs,
    nats_server_binary,
)

__all__ = [
    "NatsServer",
    "PortInUse",
    "find_free_port",
    "find_free_ports",
    "go_procs",
    "nats_server_binary",
]
