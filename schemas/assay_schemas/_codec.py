"""Decoding events from bytes, upcasting older schema versions on the way in."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import from_json

from ._envelope import NO_RUN, Event
from ._errors import InvalidEvent, describe_validation
from ._events import EVENT_TYPES, AnyEvent
from ._rules import EVENT_TOKEN, parse_event_subject

__all__ = [
    "MAX_EVENT_BYTES",
    "UPCASTERS",
    "check_subject",
    "current_version",
    "parse_event",
    "upcast",
]

MAX_EVENT_BYTES = 1 << 20
"""No stored event is larger: nats-server's default max payload (large data travels as blobs)."""

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

_ADAPTER: TypeAdapter[Event] = TypeAdapter(AnyEvent)
_VALIDATE_JSON = _ADAPTER.validator.validate_json
"""The core validator's own entry (TypeAdapter's wrapper only checks its keywords): a
replay calls it for every event in the log."""


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


@functools.cache  # read from the model once per type: `parse_event` asks it of every event
def current_version(event_type: str) -> int:
    """Schema version this code writes for `event_type`."""
    return int(EVENT_TYPES[event_type].model_fields["schema_version"].default)


def upcast(payload: dict[str, Any]) -> dict[str, Any]:
    """Bring an older payload up to the current schema version, one step at a time."""
    event_type = payload.get("event_type")
    if not isinstance(event_type, str) or event_type not in EVENT_TYPES:
        return payload
    version = payload.get("schema_version", 1)
    if not isinstance(version, int):
        raise InvalidEvent(f"{event_type}: schema_version {str(version)[:32]!r} is not an integer")
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


def check_subject(event: Event, subject: str) -> None:
    """Raise InvalidEvent unless `subject` (``<prefix>.ev.<type>.<campaign>.<run or ->``)
    names the event's own type, campaign and run.

    Consumers select events by subject and permissions are granted by subject; a body that
    claims another type, campaign or run than its subject would slip past both.
    """
    run = event.run_id or NO_RUN
    # Fast path, for nearly every event: one prefix token, then exactly these four tokens.
    expected = f"{EVENT_TOKEN}.{event.event_type}.{event.campaign_id}.{run}"
    if subject.partition(".")[2] == expected and expected.count(".") == 3:
        return
    claimed = (event.event_type, event.campaign_id, run)
    tokens = parse_event_subject(subject)
    if tokens is None:
        raise InvalidEvent(f"{event.event_type} on {subject}: not an event subject")
    if tokens[1:] != claimed:
        raise InvalidEvent(
            f"{event.event_type} on {subject}: the body says {'.'.join(claimed)}, "
            f"the subject {'.'.join(tokens[1:])}"
        )


def parse_event(data: bytes | str | dict[str, Any], *, subject: str | None = None) -> Event:
    """Decode any event, upcasting old versions; raise InvalidEvent naming the subject.

    Nothing a publisher can store makes this raise anything else: the size is checked
    before parsing, JSON nesting is bounded by the parser, and with `subject` the event
    must agree with the subject it was stored on.
    """
    if not isinstance(data, dict):
        if len(data) > MAX_EVENT_BYTES:
            size = f"{len(data)} bytes (limit {MAX_EVENT_BYTES})"
            raise InvalidEvent(f"message{_where(subject)} is {size}")
        try:
            # Fast path: current-version JSON validated in one pass by pydantic-core, whose
            # parser bounds nesting depth itself. A replay takes it for every event.
            event: Event = _VALIDATE_JSON(data)
            if event.schema_version == current_version(event.event_type):
                if subject is not None:
                    check_subject(event, subject)
                return event
        except ValidationError:
            pass  # older version, garbage, or invalid: the slow path says which
    event = _decode(data, _where(subject))
    if subject is not None:
        check_subject(event, subject)
    return event


def _where(subject: str | None) -> str:
    return f" on {subject}" if subject else ""


def _decode(data: bytes | str | dict[str, Any], where: str) -> Event:
    """The slow path: upcast older versions, or say exactly what is wrong."""
    if isinstance(data, dict):
        payload = data
    else:
        try:
            payload = from_json(data)
        except ValueError as e:  # not JSON, not UTF-8, or nested beyond the parser's limit
            raise InvalidEvent(f"message{where} is not JSON: {e}") from e
    if not isinstance(payload, dict):
        raise InvalidEvent(f"message{where} is not a JSON object")
    try:
        return _ADAPTER.validate_python(upcast(payload))
    except ValidationError as e:
        kind = str(payload.get("event_type", "?"))[:64]
        problems = describe_validation(e, tag=kind)
        raise InvalidEvent(f"{kind} event{where} is invalid: {problems}") from e
    except (TypeError, ValueError, RecursionError) as e:  # an upcaster met a malformed payload
        raise InvalidEvent(f"message{where} cannot be upcast: {type(e).__name__}: {e}") from e
