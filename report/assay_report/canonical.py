"""Canonical JSON: one byte sequence per value, so rebuilt reports compare byte for byte.

Keys sorted, no insignificant whitespace beyond one space after separators, floats
written with 12 significant digits (``format(x, ".12g")``, the last bits of a float sum
are not a finding), NaN and infinities as ``null``, tuples as lists, non-ASCII escaped.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring_ascii
from typing import Any

from pydantic import BaseModel

__all__ = ["canonical_json", "format_float"]

_string = encode_basestring_ascii
"""What ``json.dumps(text, ensure_ascii=True)`` writes for a string, without its set-up."""


def format_float(x: float) -> str:
    """A float as canonical JSON text (``null`` when not finite)."""
    if not math.isfinite(x):
        return "null"
    text = format(x, ".12g")
    if text in ("-0", "0"):
        return "0.0"
    if "e" not in text and "." not in text:
        text += ".0"  # stay a float on the way back in
    return text


def _write(value: Any, out: list[str]) -> None:
    # Dispatch on the exact type first (a report holds a hundred thousand values); the
    # isinstance chain below is the general case, and both write the same text.
    kind = type(value)
    if kind is str:
        out.append(_string(value))
    elif kind is float:
        out.append(format_float(value))
    elif kind is int:
        out.append(str(value))
    elif kind is dict:
        _write_dict(value, out)
    elif kind is list or kind is tuple:
        _write_list(value, out)
    elif value is None or isinstance(value, bool):
        out.append(json.dumps(value))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(format_float(value))
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, BaseModel):
        _write(value.model_dump(mode="python"), out)
    elif isinstance(value, dict):
        _write_dict(value, out)
    elif isinstance(value, list | tuple):
        _write_list(value, out)
    else:
        raise TypeError(f"canonical_json: cannot encode {type(value).__name__}")


def _write_dict(value: dict[Any, Any], out: list[str]) -> None:
    out.append("{")
    for i, key in enumerate(sorted(value, key=str)):
        if i:
            out.append(", ")
        out.append(_string(str(key)))
        out.append(": ")
        _write(value[key], out)
    out.append("}")


def _write_list(value: list[Any] | tuple[Any, ...], out: list[str]) -> None:
    out.append("[")
    for i, item in enumerate(value):
        if i:
            out.append(", ")
        _write(item, out)
    out.append("]")


def canonical_json(value: Any) -> bytes:
    """Encode ``value`` (dicts, lists, scalars, pydantic models) canonically, UTF-8."""
    out: list[str] = []
    _write(value, out)
    out.append("\n")
    return "".join(out).encode()
