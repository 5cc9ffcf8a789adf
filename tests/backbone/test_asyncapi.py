"""The AsyncAPI document: fresh, every event with its subject and payload schema."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import nacl.signing
import yaml

from assay.asyncapi import ASYNCAPI_FILE, asyncapi_document, render_asyncapi
from assay.bus import Subjects
from assay.config import Settings
from assay.security.signing import (
    CHAIN,
    ENROLLMENT,
    SIGNATURE,
    SIGNER,
    ensure_operator,
    signer_for,
)
from assay_schemas import EVENT_TYPES, SCHEMA_DIR


def test_committed_asyncapi_is_fresh() -> None:
    on_disk = (SCHEMA_DIR / ASYNCAPI_FILE).read_text(encoding="utf-8")
    assert on_disk == render_asyncapi(), "run `assay schemas export`: asyncapi.yaml is stale"


def _resolve(doc: dict[str, Any], ref: str) -> Any:
    node: Any = doc
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [r for k, v in node.items() for r in ([v] if k == "$ref" else _refs(v))]
    return [r for v in node for r in _refs(v)] if isinstance(node, list) else []


def test_every_event_has_its_subject_and_payload_schema() -> None:
    doc = yaml.safe_load(render_asyncapi())
    assert doc["asyncapi"] == "3.0.0"
    subjects = Subjects()
    for name in EVENT_TYPES:
        channel = doc["channels"][name]
        address = channel["address"].format(campaign_id="c1", run_id="r1")
        assert address == subjects.event(name, "c1", "r1")
        message = _resolve(doc, channel["messages"][name]["$ref"])
        assert (SCHEMA_DIR / message["payload"]["$ref"].removeprefix("./")).is_file()
        assert {doc["operations"][f"{a}{name}"]["action"] for a in ("send", "receive")} == {
            "send",
            "receive",
        }
    assert doc["channels"]["deadLetters"]["address"] == subjects.dlq("{durable}")
    assert doc["channels"]["sandboxRpc"]["address"] == subjects.rpc("sandbox", "{instance}")
    # Every reference inside the document resolves; the rest name files beside it.
    for ref in _refs(doc):
        if ref.startswith("#/"):
            _resolve(doc, ref)
        else:
            assert (SCHEMA_DIR / ref.removeprefix("./")).is_file(), ref


def test_a_prefix_moves_every_address() -> None:
    doc = asyncapi_document(Subjects(prefix="lab"))
    assert all(
        c["address"] is None or c["address"].startswith("lab.") for c in doc["channels"].values()
    )


def test_signing_headers_are_described_as_signers_send_them(tmp_path: Path) -> None:
    """An outside publisher learns from the document which headers make its event count,
    and what the signature covers: checked against a real signer's headers."""
    doc = yaml.safe_load(render_asyncapi())
    for name in EVENT_TYPES:
        headers = doc["components"]["messages"][name]["headers"]["properties"]
        assert {"Nats-Msg-Id", SIGNER, SIGNATURE, ENROLLMENT, CHAIN} <= set(headers)
        assert all(h.get("description") for h in headers.values())
    described = doc["components"]["messages"]["TaskSubmitted"]["headers"]["properties"]
    assert (
        "assay-chain:<Assay-Chain>\\n<subject>\\n<payload bytes>"
        in described[SIGNATURE]["description"]
    )
    settings = Settings(home=tmp_path)
    ensure_operator(settings)
    signer = signer_for(settings, "publisher-c1")
    assert signer is not None
    subject, data = "assay.ev.TaskSubmitted.c1.-", b'{"x": 1}'
    sent = signer.headers(subject, data)
    signed = f"assay-chain:{sent[CHAIN]}\n{subject}\n".encode() + data
    pad = "=" * (-len(sent[SIGNATURE]) % 4)
    signature = base64.urlsafe_b64decode(sent[SIGNATURE] + pad)
    # nkeys public key: base32 of a prefix byte, the 32-byte Ed25519 key and a checksum.
    raw = base64.b32decode(sent[SIGNER] + "=" * (-len(sent[SIGNER]) % 8))
    nacl.signing.VerifyKey(raw[1:33]).verify(signed, signature)  # raises when it does not hold
    statement = sent[ENROLLMENT].split(".")[0]
    enrolled = json.loads(base64.urlsafe_b64decode(statement + "=" * (-len(statement) % 4)))
    assert set(enrolled) == {"key", "name", "role"}


def test_answer_events_describe_their_submission_field() -> None:
    for name in ("TaskAccepted", "TaskRejected"):
        schema = json.loads((SCHEMA_DIR / f"{name}.json").read_text())
        assert "TaskSubmitted" in schema["properties"]["submission"]["description"]


def test_channels_name_their_writers_and_consumers_from_the_contracts() -> None:
    from assay.contract import service_contracts
    from assay.security.permissions import events_by_role

    doc = asyncapi_document()
    for role, types in events_by_role().items():
        for name in types:
            assert role in doc["channels"][name]["x-assay-writers"]
    for contract in service_contracts().values():
        for consumer in contract.consumes:
            names = [consumer.event_type] if consumer.event_type else list(EVENT_TYPES)
            for name in names:
                entry = {"service": contract.service, "durable": consumer.durable}
                assert entry in doc["channels"][name]["x-assay-consumers"]
    assert doc["channels"]["sandboxRpc"]["x-assay-servers"] == ["sandbox-manager"]
    assert doc["channels"]["sandboxRpc"]["x-assay-callers"] == ["runner"]
