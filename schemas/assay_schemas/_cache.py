"""A campaign's ``cache:``: answer repeated model requests from a local development cache.

Never on by default. While developing an agent, re-running a campaign asks the same models
the same things; with ``cache: {ttl: 7d}`` (or ``assay run --cache``) an answer already
given to an agent or a judge for the same model, base URL, messages, epoch (and judge
sample), generation parameters and tools is served again from disk, and its step (or the
judge's verdict) is marked ``cached_answer`` in the log.
"""

from __future__ import annotations

import re
from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DEFAULT_CACHE_TTL", "MAX_CACHE_TTL", "CacheSpec", "parse_duration"]

DEFAULT_CACHE_TTL = timedelta(days=7)
"""How long a cached answer is served when ``--cache`` names no expiry."""

MAX_CACHE_TTL = timedelta(days=365)
"""A development cache older than this is a stale snapshot, not a cache."""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SHORT = re.compile(r"^\s*(\d{1,9})\s*([smhdw])\s*$")


def parse_duration(value: object) -> object:
    """``7d``, ``12h``, ``30m``, ``45s``, ``2w`` as a timedelta; anything else is left to
    pydantic (seconds as a number, ISO 8601 such as ``P7D``)."""
    if isinstance(value, bool):  # YAML's `ttl: yes` is no duration, not one second
        raise ValueError(f"{value} is not a duration")
    if isinstance(value, str) and (match := _SHORT.match(value)):
        return timedelta(seconds=int(match[1]) * _UNITS[match[2]])
    return value


class CacheSpec(BaseModel):
    """A campaign's development cache of model answers (``cache:``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    ttl: timedelta = Field(default=DEFAULT_CACHE_TTL)
    """How long an answer is served again (``7d``, ``12h``, ``30m``; positive, at most
    a year); an older entry is a miss."""

    _short = field_validator("ttl", mode="before")(parse_duration)

    @field_validator("ttl")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError(f"cache ttl must be positive, not {value}")
        if value > MAX_CACHE_TTL:
            raise ValueError(f"cache ttl {value} is over the limit of {MAX_CACHE_TTL.days} days")
        return value
