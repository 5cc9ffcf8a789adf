"""Words the events' summary lines share."""

from __future__ import annotations


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
