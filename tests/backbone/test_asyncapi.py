"""The AsyncAPI document: fresh, every event with its subject and payload schema."""

from __future__ import annotations

from typing import Any

import yaml

from assay.bus import ASYNCAPI_FILE, Subjects, asyncapi_document, render_asyncapi
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
