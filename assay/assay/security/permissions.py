"""Which NATS subjects each role may publish to and subscribe on.

A service role's rights are derived from the contracts of its services
(`assay.contract`: their durables, the events they publish, the RPC subjects they serve
and call; replays need only read rights), the cli's and publisher's are written here,
and all are checked against a real nats-server by `tests/security`. A service may read the whole log (replays rebuild state), but it
publishes only the events it produces, acks only its own durables' messages, and
creates or pulls only its own durable consumers.

JetStream API subjects used through nats-py (per stream S, durable D):

- `$JS.API.STREAM.INFO.S`: `ensure_streams` and `head_sequence` on connect;
  `$JS.API.STREAM.MSG.GET.S`: direct reads (`Bus.has_event`, `last_sequence`, a run's
  first messages).
- `$JS.API.CONSUMER.INFO.S.D`, `$JS.API.CONSUMER.CREATE.S.D.<filter>`: a durable pull
  consumer is looked up, then created under its name with its filter subject.
- `$JS.API.CONSUMER.MSG.NEXT.S.D`: pull fetches; `$JS.ACK.S.D.>`: ack, nak, in-progress.
- `$JS.API.CONSUMER.CREATE.S` + `$JS.API.CONSUMER.INFO.S.*` + `$JS.FC.S.>`: replays
  (an ephemeral ordered push consumer, flow-controlled); the ephemeral create subject
  refuses a durable name, so a replay cannot take over another service's durable.
- `S_LOST` keeps JetStream's advisories `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.D`,
  its word that a message of durable D will not be delivered again though nobody settled
  it (its last delivery lost). The bus pulls D's own from it by a durable named D
  (`$JS.API.CONSUMER.INFO|CREATE|MSG.NEXT.S_LOST.D`, `$JS.ACK.S_LOST.D.>`), reads the
  message by `$JS.API.STREAM.MSG.GET.S` and dead-letters it. Only its own durables'
  advisories; nobody subscribes to the advisory subjects themselves.
- `_INBOX_<user>.>` (subscribe): PubAcks, JetStream API replies, pull batches, replay
  deliveries and sandbox RPC replies all arrive on the client's inboxes. Each user has
  its own inbox prefix (the client connects with it, see `assay.bus.make_broker`), so
  no user can subscribe to another's replies: with a shared `_INBOX.>` any user could
  read every reply, event bodies and sandbox output included.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import NamedTuple

from assay.buckets import upload_bucket_name
from assay.config import Settings
from assay.contract import (
    ROLES,
    Role,
    ServiceContract,
    fill,
    is_open,
    lost_stream_name,
    of_role,
    rpc_subject,
    service_contracts,
)
from assay_schemas import EVENT_TYPES, NO_RUN, event_subject

__all__ = [
    "ROLES",
    "Permissions",
    "Role",
    "events_by_role",
    "inbox_prefix",
    "permission_map",
    "publisher_user",
    "role_permissions",
]


@cache
def events_by_role() -> Mapping[str, tuple[str, ...]]:
    """The event types each role writes, from each event model's `written_by`: what its
    enrolled key may sign and, for the cli, its NATS publish rights (the service roles'
    come from their contracts, which must agree). The admin and the aggregator write none.
    Read from the schemas, not the contracts: every verifier needs all of it, and an
    image installs only its own service."""
    out: dict[str, tuple[str, ...]] = {}
    for name, cls in EVENT_TYPES.items():
        for role in cls.written_by:
            out[role] = (*out.get(role, ()), name)
    return out


PUBLISHER_FEEDBACK = ("TaskAccepted", "TaskRejected")
"""The runner's answers to a submission, which a publisher may read for its campaign."""


class Permissions(NamedTuple):
    """Allow-lists of one NATS user; everything else is refused by the server."""

    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    allow_responses: bool = False
    """May reply once to a request it received (sandbox RPC) without publish rights
    on the requester's inbox."""


def _events(prefix: str, types: Iterable[str]) -> list[str]:
    return [event_subject(prefix, t) for t in types]


def _log_reader(stream: str) -> list[str]:
    """Publish rights needed to connect (`ensure_streams`) and read the log."""
    return [*_reader(stream), f"$JS.API.STREAM.INFO.{lost_stream_name(stream)}"]


def _stream_infos(stream: str) -> list[str]:
    """Looking the streams up, as every connection does (`ensure_streams`)."""
    return [
        f"$JS.API.STREAM.INFO.{stream}",
        f"$JS.API.STREAM.INFO.{stream}_DLQ",
        f"$JS.API.STREAM.INFO.{lost_stream_name(stream)}",
    ]


def _reader(stream: str) -> list[str]:
    """Publish rights needed to read a stream (ordered ephemeral consumers)."""
    return [
        f"$JS.API.STREAM.INFO.{stream}",
        f"$JS.API.STREAM.INFO.{stream}_DLQ",
        f"$JS.API.STREAM.MSG.GET.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}",
        f"$JS.API.CONSUMER.INFO.{stream}.*",
        f"$JS.FC.{stream}.>",
    ]


def _durables(stream: str, prefix: str, durables: Sequence[str]) -> list[str]:
    """Publish rights of durable pull consumers, of dead-lettering their messages, and of
    pulling their max-deliveries advisories (a durable of the same name on `S_LOST`)."""
    lost = lost_stream_name(stream)
    out: list[str] = []
    for d in durables:
        out += [
            f"$JS.API.CONSUMER.CREATE.{stream}.{d}.>",
            f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{d}",
            f"$JS.ACK.{stream}.{d}.>",
            f"{prefix}.dlq.{d}",
            f"$JS.API.CONSUMER.INFO.{lost}.{d}",
            f"$JS.API.CONSUMER.CREATE.{lost}.{d}.>",
            f"$JS.API.CONSUMER.MSG.NEXT.{lost}.{d}",
            f"$JS.ACK.{lost}.{d}.>",
        ]
    return out


def _upload_writer(stream: str, campaign: str) -> list[str]:
    """Put objects into one campaign's upload bucket: chunks and metadata, nothing else
    (no purge, delete or stream update, so nothing stored can be removed)."""
    bucket = upload_bucket_name(stream, campaign)
    return [
        f"$JS.API.STREAM.INFO.OBJ_{bucket}",
        f"$JS.API.STREAM.MSG.GET.OBJ_{bucket}",
        f"$JS.API.DIRECT.GET.OBJ_{bucket}.>",
        f"$O.{bucket}.C.*",
        f"$O.{bucket}.M.*",
    ]


def _upload_reader(stream: str, campaign: str) -> list[str]:
    """Read one campaign's upload bucket (an ordered consumer per object, like a replay)."""
    bucket = upload_bucket_name(stream, campaign)
    return [
        "$JS.API.STREAM.NAMES",
        f"$JS.API.DIRECT.GET.OBJ_{bucket}.>",
        *_reader(f"OBJ_{bucket}"),
        f"$JS.API.CONSUMER.DELETE.OBJ_{bucket}.*",
    ]


def _dedupe(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def inbox_prefix(user: str) -> str:
    """The private inbox prefix of one NATS user: its replies arrive only there."""
    return f"_INBOX_{user}"


def role_permissions(
    role: Role,
    *,
    stream: str,
    prefix: str,
    campaign: str | None = None,
    judge_id: str | None = None,
    instances: Sequence[str] = (),
    user: str | None = None,
    upload_campaigns: Sequence[str] = (),
) -> Permissions:
    """The allow-lists of one role on the stream `stream` under subject prefix `prefix`.

    `campaign` is required for `publisher` (the one campaign it may submit tasks to).
    `judge_id` narrows the judge's durable to `judge-<id>`, `instances` the
    sandbox-manager's per-instance durables and RPC subjects to those instance names
    (`ASSAY_INSTANCE`). Without them any judge id / instance is allowed, which still
    bounds what the user publishes but lets it pull or ack any durable: NATS wildcards
    match whole tokens only, so `judge-*` cannot be written. `user` is the NATS user
    name the permissions are for (default: the role's name); it names the private inbox.
    `upload_campaigns` are the campaigns whose upload buckets the runner imports from.
    """
    inbox = f"{inbox_prefix(user or role)}.>"
    if role == "admin":
        return Permissions(publish=(">",), subscribe=(">",), allow_responses=False)
    if role == "publisher":
        if not campaign:
            raise ValueError("role 'publisher' needs the campaign it may submit tasks to")
        return Permissions(
            publish=_dedupe(
                [
                    event_subject(prefix, "TaskSubmitted", campaign, NO_RUN),
                    *_stream_infos(stream),
                    *_upload_writer(stream, campaign),
                ]
            ),
            # Feedback arrives as core-NATS messages on the event subjects of its own
            # campaign: a publisher subscribes before it submits (no stream reads needed).
            subscribe=_dedupe(
                [inbox, *(event_subject(prefix, t, campaign, NO_RUN) for t in PUBLISHER_FEEDBACK)]
            ),
        )
    if role == "cli":
        # `assay submit` creates the streams when missing and publishes the campaign;
        # `assay events/report/replay/audit` read the log and the dead letters. Reviewers
        # have no NATS user: `assay view --review` and `assay review import` publish their
        # verdicts over the cli's connection, and only an enrolled reviewer's signature
        # makes one count (the aggregator's counting rule).
        return Permissions(
            publish=_dedupe(
                [
                    *_events(prefix, events_by_role()["cli"]),
                    *_events(prefix, events_by_role().get("reviewer", ())),
                    *_log_reader(stream),
                    f"$JS.API.STREAM.CREATE.{stream}",
                    f"$JS.API.STREAM.CREATE.{stream}_DLQ",
                    f"$JS.API.STREAM.CREATE.{lost_stream_name(stream)}",
                    f"$JS.API.CONSUMER.CREATE.{stream}_DLQ",
                    f"$JS.API.CONSUMER.CREATE.{stream}_DLQ.>",
                    f"$JS.FC.{stream}_DLQ.>",
                    f"$JS.API.CONSUMER.INFO.{stream}_DLQ.*",
                    f"$JS.API.CONSUMER.MSG.NEXT.{stream}_DLQ.*",
                ]
            ),
            subscribe=(inbox,),
        )
    contracts = of_role(service_contracts().values(), role)
    if not contracts:
        known = ", ".join(ROLES)
        raise ValueError(f"unknown role {role!r} or none of its services installed; roles: {known}")
    if judge_id:  # the user of one named judge: only the judge service, narrowed to its id
        contracts = [c for c in contracts if any("{judge_id}" in d.durable for d in c.consumes)]
    return _service_permissions(
        contracts,
        stream=stream,
        prefix=prefix,
        inbox=inbox,
        values={"judge_id": judge_id} if judge_id else {},
        instances=instances,
        upload_campaigns=upload_campaigns,
    )


def _fewest(durables: Sequence[str]) -> list[str]:
    """`durables` without repeats; only `*` when one of them is open (it covers the rest)."""
    return ["*"] if "*" in durables else list(_dedupe(durables))


def _service_permissions(
    contracts: Sequence[ServiceContract],
    *,
    stream: str,
    prefix: str,
    inbox: str,
    values: Mapping[str, str],
    instances: Sequence[str],
    upload_campaigns: Sequence[str],
) -> Permissions:
    """The allow-lists of a user that runs the services `contracts` (one role)."""
    # Per instance: the durables and RPC subjects with an `{instance}` placeholder, after
    # the shared ones; with no instance fixed, a placeholder allows any (`*`).
    fills = [{**values, "instance": i} for i in instances] or [dict(values)]
    durables = [c.durable for k in contracts for c in k.consumes if not is_open(c.durable)]
    serves = [s for k in contracts for s in k.serves if not is_open(s)]
    for each in fills:
        durables += [
            fill(c.durable, each) for k in contracts for c in k.consumes if is_open(c.durable)
        ]
        serves += [fill(s, each) for k in contracts for s in k.serves if is_open(s)]
    published = _dedupe(t for k in contracts for t in k.published_types)
    calls = _dedupe(rpc_subject(prefix, s, values) for k in contracts for s in k.calls)
    uploads = any(k.reads_uploads for k in contracts)
    return Permissions(
        publish=_dedupe(
            [
                *_events(prefix, published),
                *_log_reader(stream),
                *_durables(stream, prefix, _fewest(durables)),
                *calls,
                *(p for c in upload_campaigns if uploads for p in _upload_reader(stream, c)),
            ]
        ),
        # A service that serves RPC replies to the requester's inbox: allowed as responses
        # only, so it cannot publish into other inboxes.
        subscribe=_dedupe([inbox, *(f"{prefix}.rpc.{s}" for s in serves)]),
        allow_responses=bool(serves),
    )


def publisher_user(campaign: str) -> str:
    """User name of the external publisher of one campaign."""
    return f"publisher-{campaign}"


def permission_map(
    settings: Settings,
    *,
    publisher_campaigns: Sequence[str] = (),
    judge_ids: Sequence[str] = (),
    instances: Sequence[str] = (),
) -> dict[str, Permissions]:
    """Every user of a deployment and its allow-lists, keyed by user name.

    Pure: depends only on the stream name and subject prefix of `settings` and the
    arguments. One user per service role (user name = role); judges share the `judge`
    user, and each id in `judge_ids` also gets its own `judge-<id>` user narrowed to its
    durable; one `publisher-<campaign>` user per campaign open to outside submission.
    """
    stream, prefix = settings.stream, settings.subject_prefix
    users: dict[str, Permissions] = {
        role: role_permissions(
            role,
            stream=stream,
            prefix=prefix,
            instances=instances,
            user=role,
            upload_campaigns=publisher_campaigns,
        )
        for role in ROLES
        if role in ("admin", "cli") or of_role(service_contracts().values(), role)
    }
    for judge_id in judge_ids:
        users[f"judge-{judge_id}"] = role_permissions(
            "judge", stream=stream, prefix=prefix, judge_id=judge_id, user=f"judge-{judge_id}"
        )
    for campaign in publisher_campaigns:
        users[publisher_user(campaign)] = role_permissions(
            "publisher",
            stream=stream,
            prefix=prefix,
            campaign=campaign,
            user=publisher_user(campaign),
        )
    return users
