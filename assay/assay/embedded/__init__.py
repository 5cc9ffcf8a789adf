"""The embedded stack: a local nats-server with JetStream, a local blob store."""

# `_nats` lists its public names once, in its own ``__all__``.
from . import _nats
from ._nats import *  # noqa: F403

__all__ = _nats.__all__
