"""JSON Schema export, so other systems can publish valid events without Python."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from ._domain import CampaignSpec, Task
from ._events import EVENT_TYPES, AnyEvent
from ._rubric import Rubric

__all__ = ["SCHEMA_DIR", "export_schemas", "render_schemas"]

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "json"
"""`schemas/json/` of a source checkout, where the committed schemas live for other languages."""

# What a decoder needs to read an event, though the Python models give it a default.
_DECODER_NEEDS = ("event_type",)

_DOMAIN: dict[str, type[BaseModel]] = {"CampaignSpec": CampaignSpec, "Task": Task, "Rubric": Rubric}


def _dump(schema: dict[str, object]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def _require_envelope(schema: dict[str, Any]) -> dict[str, Any]:
    """Mark the fields a decoder needs as required in every event schema inside `schema`."""
    for node in [schema, *schema.get("$defs", {}).values()]:
        if "event_type" in node.get("properties", {}):
            required = node.setdefault("required", [])
            required.extend(f for f in _DECODER_NEEDS if f not in required)
    return schema


def render_schemas() -> dict[str, str]:
    """File name -> JSON Schema text for every event, the event union and domain models."""
    files = {
        f"{name}.json": _dump(_require_envelope(cls.model_json_schema(mode="validation")))
        for name, cls in EVENT_TYPES.items()
    }
    union = TypeAdapter(AnyEvent).json_schema(mode="validation")
    files["Event.json"] = _dump(_require_envelope(union))
    for name, cls in _DOMAIN.items():
        files[f"{name}.json"] = _dump(cls.model_json_schema(mode="validation"))
    return files


def export_schemas(out_dir: Path = SCHEMA_DIR) -> list[Path]:
    """Write every schema into `out_dir`, removing stale files; return the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rendered = render_schemas()
    for old in out_dir.glob("*.json"):
        if old.name not in rendered:
            old.unlink()
    paths = []
    for name, text in sorted(rendered.items()):
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
