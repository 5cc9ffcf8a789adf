"""Decoding events from bytes, upcasting older schema versions on the way in."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ._errors import InvalidEvent
from ._events import EVENT_TYPES, AnyEvent, Event

__all__ = ["UPCASTERS", "current_version", "parse_event", "upcast"]

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

_ADAPTER: TypeAdapter[Event] = TypeAdapter(AnyEvent)


def _step_v1_to_v2(payload: dict[str, Any]) -> dict[str, Any]:
    """v1 steps carried flat token counts; v2 nests them in `usage`."""
    out = dict(payload)
    out["usage"] = {
        "input_tokens": out.pop("input_tokens", 0),
        "output_tokens": out.pop("output_tokens", 0),
        "cached_tokens": out.pop("cached_tokens", 0),
    }
    out["schema_version"] = 2
    return out


UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("AgentStepLogged", 1): _step_v1_to_v2,
}
"""(event_type, from_version) -> function returning the payload at from_version + 1."""


def current_version(event_type: str) -> int:
    """Schema version this code writes for `event_type`."""
    default = EVENT_TYPES[event_type].model_fields["schema_version"].default
    return int(default)


def upcast(payload: dict[str, Any]) -> dict[str, Any]:
    """Bring an older payload up to the current schema version, one step at a time."""
    event_type = payload.get("event_type")
    if not isinstance(event_type, str) or event_type not in EVENT_TYPES:
        return payload
    version = int(payload.get("schema_version", 1))
    target = current_version(event_type)
    while version < target:
        step = UPCASTERS.get((event_type, version))
        if step is None:
            raise InvalidEvent(f"{event_type} v{version}: no upcaster to v{version + 1}")
        payload = step(payload)
        version = int(payload.get("schema_version", version + 1))
    if version > target:
        raise InvalidEvent(f"{event_type} v{version} is newer than this code (v{target})")
    return payload


def parse_event(data: bytes | str | dict[str, Any], *, subject: str | None = None) -> Event:
    """Decode any event, upcasting old versions; raise InvalidEvent naming the subject."""
    where = f" on {subject}" if subject else ""
    if not isinstance(data, dict):
        try:
            # Fast path: current-version JSON validated in one pass by pydantic-core.
            event = _ADAPTER.validate_json(data)
            if event.schema_version == current_version(event.event_type):
                return event
        except ValidationError:
            pass  # older version, garbage, or invalid: the slow path says which
    if isinstance(data, dict):
        payload = data
    else:
        try:
            payload = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InvalidEvent(f"message{where} is not JSON: {e}") from e
    if not isinstance(payload, dict):
        raise InvalidEvent(f"message{where} is not a JSON object")
    try:
        return _ADAPTER.validate_python(upcast(payload))
    except ValidationError as e:
        kind = payload.get("event_type", "?")
        raise InvalidEvent(f"{kind} event{where} is invalid: {e}") from e
