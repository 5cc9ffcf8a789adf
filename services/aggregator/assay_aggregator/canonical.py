"""Canonical JSON: one byte sequence per value, so rebuilt reports compare byte for byte.

Keys sorted, no insignificant whitespace beyond one space after separators, floats
written with 12 significant digits (``format(x, ".12g")``, the last bits of a float sum
are not a finding), NaN and infinities as ``null``, tuples as lists, non-ASCII escaped.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel

__all__ = ["canonical_json", "format_float"]


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
    if value is None or isinstance(value, bool):
        out.append(json.dumps(value))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(format_float(value))
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=True))
    elif isinstance(value, BaseModel):
        _write(value.model_dump(mode="python"), out)
    elif isinstance(value, dict):
        out.append("{")
        for i, key in enumerate(sorted(value, key=str)):
            if i:
                out.append(", ")
            out.append(json.dumps(str(key), ensure_ascii=True))
            out.append(": ")
            _write(value[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(", ")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"canonical_json: cannot encode {type(value).__name__}")


def canonical_json(value: Any) -> bytes:
    """Encode ``value`` (dicts, lists, scalars, pydantic models) canonically, UTF-8."""
    out: list[str] = []
    _write(value, out)
    out.append("\n")
    return "".join(out).encode()
