"""An AsyncAPI 3.0 document of every subject and event, for publishers in other languages.

Built from the event models, the subject layout and the installed services' contracts, so
it cannot drift from any of them; each event's payload points at its JSON Schema exported
beside it in `schemas/json/`. Each channel says which roles may write its events and which
durable consumers read them (`x-assay-writers`, `x-assay-consumers`).

It stands beside the contracts it is derived from, above the bus and the permissions it
reads: the bus itself needs none of it.
"""

from __future__ import annotations

import inspect
from typing import Any

import yaml
from pydantic import TypeAdapter

from assay.bus import DEAD_DELIVERIES, DEAD_REASON, DEAD_SEQUENCE, DEAD_SUBJECT, Subjects
from assay.contract import service_contracts
from assay.security.permissions import events_by_role
from assay.security.signing import CHAIN, ENROLLMENT, SIGNATURE, SIGNER
from assay_schemas import EVENT_TYPES, NO_RUN, SandboxReply, SandboxRequest, current_version

__all__ = ["ASYNCAPI_FILE", "asyncapi_document", "render_asyncapi"]

ASYNCAPI_FILE = "asyncapi.yaml"
"""Its name beside the JSON Schemas."""

_INFO = """Assay's event log on NATS JetStream. Every event is published on
`<prefix>.ev.<event_type>.<campaign_id>.<run_id>` (`{no_run}` for events of no run) with
`Nats-Msg-Id` set to its `event_id`, so a retried publish is stored once. An outside
system publishes `TaskSubmitted` and is answered by `TaskAccepted` or `TaskRejected` on its
campaign's subjects. Attachments are uploaded first into the campaign's JetStream object
store bucket `<stream>_UP_<campaign_id>`, each object named by its sha256."""


EVENT_HEADERS: dict[str, dict[str, Any]] = {
    "Nats-Msg-Id": {"type": "string", "description": "The event's `event_id` (stored once)."},
    SIGNER: {
        "type": "string",
        "description": "The signer's Ed25519 public key, NATS nkeys format (`U...`).",
    },
    SIGNATURE: {
        "type": "string",
        "description": "Ed25519 signature (base64url, no padding) of the signed bytes: "
        "`<subject>\\n<payload bytes>`, or with `Assay-Chain` "
        "`assay-chain:<Assay-Chain>\\n<subject>\\n<payload bytes>`.",
    },
    ENROLLMENT: {
        "type": "string",
        "description": "The operator's enrollment of the signer: `<statement>.<signature>`, "
        "both base64url; the statement is compact JSON `{key, name, role}` (sorted keys) signed "
        "by the operator key (`assay keys enroll`; `assay keys operator` prints that key).",
    },
    CHAIN: {
        "type": "string",
        "description": "Optional: `<chain id>.<index>.<digest of the previous link>` of the "
        "signer's hash chain; Assay's services send it, an outside client may leave it out.",
    },
}
"""Headers of an event message. An event counts only when signed by a key the operator
enrolled for a role that may write its type; an unsigned one is stored but refused."""


def _parameter(description: str) -> dict[str, Any]:
    return {"description": description}


_CAMPAIGN = _parameter("The campaign id (a safe subject token).")
_RUN = _parameter(f"The run id; `{NO_RUN}` for an event of no run.")


def _summary(cls: type) -> str:
    return (inspect.getdoc(cls) or cls.__name__).splitlines()[0]


def _consumers(event_type: str) -> list[dict[str, str]]:
    """The durable consumers (templates, from the contracts) that read `event_type`."""
    return [
        {"service": contract.service, "durable": consumer.durable}
        for contract in service_contracts().values()
        for consumer in contract.consumes
        if consumer.event_type in (None, event_type)
    ]


def _event_parts(subjects: Subjects) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    writers = events_by_role()
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    for name, cls in EVENT_TYPES.items():
        messages[name] = {
            "name": name,
            "title": name,
            "summary": _summary(cls),
            "contentType": "application/json",
            "headers": {
                "type": "object",
                "properties": {k: dict(v) for k, v in EVENT_HEADERS.items()},
                "required": ["Nats-Msg-Id"],
            },
            "payload": {"$ref": f"./{name}.json"},
            "x-schema-version": current_version(name),
        }
        channels[name] = {
            "address": subjects.event(name, "{campaign_id}", "{run_id}"),
            "messages": {name: {"$ref": f"#/components/messages/{name}"}},
            "parameters": {"campaign_id": dict(_CAMPAIGN), "run_id": dict(_RUN)},
            "x-assay-writers": [role for role, types in writers.items() if name in types],
            "x-assay-consumers": _consumers(name),
        }
        for action in ("send", "receive"):
            operations[f"{action}{name}"] = {
                "action": action,
                "channel": {"$ref": f"#/channels/{name}"},
                "messages": [{"$ref": f"#/channels/{name}/messages/{name}"}],
            }
    return channels, operations, messages


def _hoisted(schema: dict[str, Any], shared: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its `$defs` moved into the document's components (refs rewritten)."""

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: rewrite(v) for k, v in node.items()}
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        if isinstance(node, str) and node.startswith("#/$defs/"):
            return "#/components/schemas/" + node.removeprefix("#/$defs/")
        return node

    schema = rewrite(schema)
    shared.update(schema.pop("$defs", {}))
    return dict(schema)


def _rpc(service: str, *, serving: bool) -> list[str]:
    """The services that serve (or call) RPC subjects of `service` (`sandbox.`)."""
    return [
        c.service
        for c in service_contracts().values()
        if any(s.startswith(service) for s in (c.serves if serving else c.calls))
    ]


def _other_parts(
    subjects: Subjects, shared: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    headers = {
        DEAD_REASON: "why",
        DEAD_SUBJECT: "original subject",
        DEAD_SEQUENCE: "original stream sequence",
        DEAD_DELIVERIES: "deliveries tried",
    }
    messages: dict[str, Any] = {
        "DeadLetter": {
            "name": "DeadLetter",
            "summary": "A message no consumer could take, as received, with why and whence.",
            "headers": {
                "type": "object",
                "properties": {k: {"type": "string", "description": d} for k, d in headers.items()},
            },
            "payload": {},
        },
        "SandboxRequest": {
            "name": "SandboxRequest",
            "summary": "A command for a sandbox-manager instance (core NATS request).",
            "contentType": "application/json",
            "payload": _hoisted(TypeAdapter(SandboxRequest).json_schema(mode="validation"), shared),
        },
        "SandboxReply": {
            "name": "SandboxReply",
            "summary": "The sandbox-manager's answer to a command.",
            "contentType": "application/json",
            "payload": _hoisted(SandboxReply.model_json_schema(mode="validation"), shared),
        },
    }
    channels: dict[str, Any] = {
        "deadLetters": {
            "address": subjects.dlq("{durable}"),
            "messages": {"DeadLetter": {"$ref": "#/components/messages/DeadLetter"}},
            "parameters": {"durable": _parameter("The consumer that gave the message up.")},
        },
        "sandboxRpc": {
            "address": subjects.rpc("sandbox", "{instance}"),
            "messages": {"SandboxRequest": {"$ref": "#/components/messages/SandboxRequest"}},
            "parameters": {"instance": _parameter("The sandbox-manager instance.")},
            "x-assay-servers": _rpc("sandbox.", serving=True),
            "x-assay-callers": _rpc("sandbox.", serving=False),
        },
        "sandboxReplies": {
            "address": None,
            "description": "The requester's inbox (core NATS reply subject).",
            "messages": {"SandboxReply": {"$ref": "#/components/messages/SandboxReply"}},
        },
    }
    operations: dict[str, Any] = {
        "receiveDeadLetter": {
            "action": "receive",
            "channel": {"$ref": "#/channels/deadLetters"},
            "messages": [{"$ref": "#/channels/deadLetters/messages/DeadLetter"}],
        },
        "sendSandboxRequest": {
            "action": "send",
            "channel": {"$ref": "#/channels/sandboxRpc"},
            "messages": [{"$ref": "#/channels/sandboxRpc/messages/SandboxRequest"}],
            "reply": {
                "channel": {"$ref": "#/channels/sandboxReplies"},
                "messages": [{"$ref": "#/channels/sandboxReplies/messages/SandboxReply"}],
            },
        },
    }
    return channels, operations, messages


def asyncapi_document(subjects: Subjects | None = None) -> dict[str, Any]:
    """The AsyncAPI 3.0 document as a mapping."""
    subjects = subjects or Subjects()
    channels, operations, messages = _event_parts(subjects)
    shared: dict[str, Any] = {}
    more = _other_parts(subjects, shared)
    channels.update(more[0])
    operations.update(more[1])
    messages.update(more[2])
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "Assay",
            "version": "1.0.0",
            "description": " ".join(_INFO.format(no_run=NO_RUN).split()),
        },
        "defaultContentType": "application/json",
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages, "schemas": dict(sorted(shared.items()))},
    }


def render_asyncapi(subjects: Subjects | None = None) -> str:
    """The AsyncAPI 3.0 document as YAML text (stable, for a committed file)."""
    return yaml.safe_dump(
        asyncapi_document(subjects), sort_keys=False, allow_unicode=True, width=100
    )
