"""JSON Schema export, so other systems can publish valid events without Python."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, TypeAdapter

from ._domain import CampaignSpec, Task
from ._events import EVENT_TYPES, AnyEvent
from ._rubric import Rubric

__all__ = ["SCHEMA_DIR", "export_schemas", "render_schemas"]

SCHEMA_DIR = Path(__file__).parent / "json"

_DOMAIN: dict[str, type[BaseModel]] = {"CampaignSpec": CampaignSpec, "Task": Task, "Rubric": Rubric}


def _dump(schema: dict[str, object]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def render_schemas() -> dict[str, str]:
    """File name -> JSON Schema text for every event, the event union and domain models."""
    files = {
        f"{name}.json": _dump(cls.model_json_schema(mode="validation"))
        for name, cls in EVENT_TYPES.items()
    }
    files["Event.json"] = _dump(TypeAdapter(AnyEvent).json_schema(mode="validation"))
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
