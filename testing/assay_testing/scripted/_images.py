"""Images counted as the APIs bill them, not as the characters of their base64.

Anthropic bills an image at about width x height / 750 tokens, after scaling it to at
most 1,568 pixels on its long edge; OpenAI (high detail) at 85 + 170 per 512-pixel tile,
after fitting it in 2,048 x 2,048 and its short side to 768. A 200 KB plot is some 1,600
tokens, not the 50,000 its base64 would be at four characters a token. The server and its
prompt cache count an image as a stand-in text of that many tokens, derived from the
image's digest, so that identical images still share a cached prefix.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import re
import struct
from typing import Any, Final

from ._script import Api

__all__ = ["image_tokens", "images_in", "with_stand_ins"]

_CHARS_PER_TOKEN: Final = 4
_UNKNOWN_SIZE: Final = (1092, 1092)
"""An image whose size cannot be read is billed like a ~1.2-megapixel one."""
_DATA_URL = re.compile(r"^data:image/[a-z]+;base64,(?P<data>.*)$", re.DOTALL)


def _size(raw: bytes) -> tuple[int, int]:
    if raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) >= 24:
        width, height = struct.unpack(">II", raw[16:24])
        return int(width), int(height)
    i = 2
    while raw[:2] == b"\xff\xd8" and i + 9 < len(raw):
        if raw[i] != 0xFF:
            break
        marker, length = raw[i + 1], struct.unpack(">H", raw[i + 2 : i + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            height, width = struct.unpack(">HH", raw[i + 5 : i + 9])
            return int(width), int(height)
        i += 2 + length
    return _UNKNOWN_SIZE


def image_tokens(api: Api, data: str) -> int:
    """What `api` bills for the base64 image `data`."""
    try:
        width, height = _size(base64.b64decode(data[:200_000], validate=False))
    except (binascii.Error, ValueError, struct.error):
        width, height = _UNKNOWN_SIZE
    width, height = max(1, width), max(1, height)
    if api == "anthropic":
        scale = min(1.0, 1568 / max(width, height))
        return max(1, math.ceil(width * scale * height * scale / 750))
    fit = min(1.0, 2048 / max(width, height))
    short = min(1.0, 768 / (min(width, height) * fit))
    tiles = math.ceil(width * fit * short / 512) * math.ceil(height * fit * short / 512)
    return 85 + 170 * tiles


def _payload(node: dict[str, Any]) -> str | None:
    """The base64 of an image block on either API, else None."""
    source = node.get("source")
    if node.get("type") == "image" and isinstance(source, dict):
        data = source.get("data")
        return data if isinstance(data, str) else None
    url = node.get("image_url")
    if node.get("type") == "image_url" and isinstance(url, dict):
        m = _DATA_URL.match(str(url.get("url", "")))
        return m["data"] if m else None
    return None


def images_in(value: Any) -> list[str]:
    """The base64 payloads of every image block inside `value`."""
    if isinstance(value, dict):
        found = _payload(value)
        if found is not None:
            return [found]
        return [d for v in value.values() for d in images_in(v)]
    if isinstance(value, list):
        return [d for v in value for d in images_in(v)]
    return []


def with_stand_ins(api: Api, value: Any) -> Any:
    """`value` with each image block replaced by a stand-in text as long as its tokens."""
    if isinstance(value, dict):
        data = _payload(value)
        if data is not None:
            digest = hashlib.sha256(data.encode()).hexdigest()
            chars = image_tokens(api, data) * _CHARS_PER_TOKEN
            return {"type": "image", "stand_in": (digest * (chars // 64 + 1))[:chars]}
        return {k: with_stand_ins(api, v) for k, v in value.items()}
    if isinstance(value, list):
        return [with_stand_ins(api, v) for v in value]
    return value
