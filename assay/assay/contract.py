"""What each service promises the bus: one contract per service, declared beside it.

A contract names the NATS role the service connects and signs as, the durable consumers
it registers (each with the event it filters on), the events it publishes and the RPC
subjects it serves and calls. Everything that used to repeat a service's wiring is
derived from it: the NATS permissions of its role (`assay.security.permissions`), the
AsyncAPI document (`assay.bus`) and the service's own subscriptions (`assay.bus.subscribe`). Who
may *sign* an event type is not read from here but from the event model (`written_by`):
every verifier needs all of it, and an image installs only its own service.

Each service package exposes ``CONTRACT`` in ``<package>/contract.py`` and registers it
under the ``assay.contracts`` entry-point group, by the same name as its factory in
``assay.services``: the core finds contracts the way it finds services, without importing
a service package by name (no arrow from the core up to the services).

Durable names and RPC subjects may hold a ``{instance}`` or ``{judge_id}`` placeholder,
filled from settings when the service subscribes; in permissions a placeholder whose value
is not fixed for the deployment allows any durable (NATS wildcards match whole tokens
only, so ``judge-*`` cannot be written).
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import Any, Generic, Literal, TypeVar, get_args

from assay_schemas import ConfigError, Event

__all__ = [
    "CONTRACT_GROUP",
    "PLACEHOLDERS",
    "ROLES",
    "Consumer",
    "Role",
    "ServiceContract",
    "advisory_subject",
    "fill",
    "is_open",
    "lost_stream_name",
    "of_role",
    "rpc_subject",
    "service_contracts",
]

CONTRACT_GROUP = "assay.contracts"

Role = Literal["admin", "cli", "runner", "sandbox-manager", "judge", "aggregator", "publisher"]
"""The NATS users' roles: one per kind of service, plus the operator, the CLI and outside
publishers (those three are no service and keep their rules in the permissions)."""
ROLES: tuple[Role, ...] = get_args(Role)

PLACEHOLDERS = frozenset({"instance", "judge_id"})
"""What a durable name or RPC subject may leave open until the service is built."""


def _placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def _check_template(template: str) -> None:
    unknown = _placeholders(template) - PLACEHOLDERS
    if unknown:
        raise ValueError(f"{template!r}: unknown placeholders {sorted(unknown)}")


def fill(template: str, values: Mapping[str, str]) -> str:
    """`template` with its placeholders filled from `values`; a dot-separated token whose
    placeholder has no value becomes `*` (any value of that token, never more)."""
    out = []
    for token in template.split("."):
        names = _placeholders(token)
        if any(n not in values for n in names):
            out.append("*")
        else:
            out.append(token.format(**{n: values[n] for n in names}) if names else token)
    return ".".join(out)


def rpc_subject(prefix: str, template: str, values: Mapping[str, str]) -> str:
    """The NATS subject of an RPC subject template (`serves`/`calls`) under `prefix`."""
    return f"{prefix}.rpc.{fill(template, values)}"


def advisory_subject(stream: str, durable: str) -> str:
    """Where JetStream says that a message of `durable` (`*`: any) reached its
    max_deliver unsettled (its last delivery lost). The stream `lost_stream_name(stream)`
    keeps these advisories, and the bus pulls each durable's own from it under the same
    durable name, so its NATS permissions allow exactly that (`assay.security.permissions`)."""
    return f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.{durable}"


def lost_stream_name(stream: str) -> str:
    """The stream that keeps the max-deliveries advisories of `stream`'s durables."""
    return f"{stream}_LOST"


def is_open(template: str) -> bool:
    """Whether `template` has a placeholder (its value comes from settings)."""
    return bool(_placeholders(template))


E = TypeVar("E", bound=Event)


@dataclass(frozen=True)
class Consumer(Generic[E]):
    """One durable pull consumer: its name and the event type it filters on."""

    durable: str
    """Durable name; may hold `{instance}` / `{judge_id}`."""
    event: type[E]
    """The one event type it takes (its filter subject); `Event` itself: every event."""

    def __post_init__(self) -> None:
        _check_template(self.durable)

    @property
    def event_type(self) -> str | None:
        """The event type's name, as on its subject."""
        return None if self.event is Event else _event_name(self.event)


@dataclass(frozen=True)
class ServiceContract:
    """What one service consumes, publishes, serves and calls on the bus, and as whom."""

    service: str
    """Its name, as `assay serve` takes it (the `assay.services` entry point)."""
    role: Role
    """The NATS user it connects as and the role its signing key is enrolled for."""
    consumes: tuple[Consumer[Any], ...] = ()
    publishes: tuple[type[Event], ...] = ()
    serves: tuple[str, ...] = ()
    """RPC subjects (after `<prefix>.rpc.`) it answers, e.g. ``sandbox.{instance}``."""
    calls: tuple[str, ...] = ()
    """RPC subjects (after `<prefix>.rpc.`) it sends requests to, e.g. ``sandbox.*``."""
    reads_uploads: bool = False
    """Whether it imports attachments from campaigns' upload buckets."""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"{self.service}: unknown role {self.role!r}")
        durables = [c.durable for c in self.consumes]
        if len(set(durables)) != len(durables):
            raise ValueError(f"{self.service}: a durable name is declared twice")
        for subject in (*self.serves, *self.calls):
            _check_template(subject)

    @property
    def published_types(self) -> tuple[str, ...]:
        """Names of the event types it publishes, in declaration order."""
        return tuple(_event_name(e) for e in self.publishes)

    def consumer(self, durable: str) -> Consumer[Any]:
        """Its consumer declared under `durable` (the template, placeholders unfilled)."""
        for c in self.consumes:
            if c.durable == durable:
                return c
        raise KeyError(f"{self.service} declares no consumer {durable!r}")


def _event_name(cls: type[Event]) -> str:
    default = cls.model_fields["event_type"].default
    return default if isinstance(default, str) else cls.__name__


@cache
def service_contracts() -> Mapping[str, ServiceContract]:
    """The contract of every installed service, by service name (loaded once)."""
    found: dict[str, ServiceContract] = {}
    for ep in sorted(entry_points(group=CONTRACT_GROUP), key=lambda e: e.name):
        contract = ep.load()
        if not isinstance(contract, ServiceContract) or contract.service != ep.name:
            raise ConfigError(f"entry point {ep.name!r} in {CONTRACT_GROUP} is not its contract")
        found[ep.name] = contract
    return found


def of_role(contracts: Iterable[ServiceContract], role: Role) -> list[ServiceContract]:
    """The contracts of the services that connect as `role`."""
    return [c for c in contracts if c.role == role]
