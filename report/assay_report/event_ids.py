"""The applied events' ids and sequences, compact in the snapshot.

A 10x log holds 437k event ids: as a JSON object they were a third of the snapshot's
bytes and 0.3 s of every load (one str and one int object per event, then a dict). Here
they are stored as one string (the sorted ids, concatenated) and two little-endian
int64 arrays in base64 (where each id ends in that string, and its sequence), which
decode into three objects. A lookup bisects the sorted ids; ids applied after the load
go to an ordinary dict beside them. An id may hold any text (it comes from a publisher):
ids are cut by offsets, never by a separator.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, TypeVar, overload

import numpy as np

__all__ = ["EventIds"]

_INT64 = np.dtype("<i8")
T = TypeVar("T")


def _ints(text: str) -> np.ndarray[Any, np.dtype[np.int64]]:
    return np.frombuffer(base64.b64decode(text, validate=True), dtype=_INT64)


def _text(values: list[int]) -> str:
    return base64.b64encode(np.asarray(values, dtype=_INT64).tobytes()).decode("ascii")


class EventIds(MutableMapping[str, int]):
    """Event id -> the stream sequence it was applied at (a dict's behaviour)."""

    __slots__ = ("_added", "_blob", "_ends", "_miss", "_seqs")

    def __init__(self, items: Mapping[str, int] | None = None) -> None:
        self._blob = ""
        self._ends: list[int] = []
        self._seqs: list[int] = []
        self._added: dict[str, int] = dict(items or {})
        self._miss: str | None = None
        """The last id not found: the counting rule asks, then the fold asks again."""

    def _find(self, key: str) -> int:
        """Index of `key` among the loaded ids, or -1."""
        if key == self._miss:
            return -1
        blob, ends = self._blob, self._ends
        lo, hi = 0, len(ends)
        while lo < hi:
            mid = (lo + hi) // 2
            start = ends[mid - 1] if mid else 0
            if blob[start : ends[mid]] < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(ends) and blob[(ends[lo - 1] if lo else 0) : ends[lo]] == key:
            return lo
        self._miss = key
        return -1

    def __getitem__(self, key: str) -> int:
        found = self._added.get(key)
        if found is not None:
            return found
        if type(key) is str:
            i = self._find(key)
            if i >= 0:
                return self._seqs[i]
        raise KeyError(key)

    @overload
    def get(self, key: str, /) -> int | None: ...
    @overload
    def get(self, key: str, default: int | T, /) -> int | T: ...

    def get(self, key: str, default: object = None, /) -> object:
        # Mapping's own `get` goes through __getitem__, which raises KeyError for a new id:
        # the counting rule asks of every event folded, and nearly all are new.
        found = self._added.get(key)
        if found is not None:
            return found
        if self._ends and type(key) is str:
            i = self._find(key)
            if i >= 0:
                return self._seqs[i]
        return default

    def __contains__(self, key: object) -> bool:
        if key in self._added:
            return True
        return bool(self._ends) and type(key) is str and self._find(key) >= 0

    def __setitem__(self, key: str, value: int) -> None:
        self._added[key] = value

    def __delitem__(self, key: str) -> None:
        # The fold never forgets an event; a loaded id is dropped by re-basing without it.
        if key in self._added:
            del self._added[key]
            return
        if self._find(key) < 0:
            raise KeyError(key)
        rest = {k: v for k, v in self.items() if k != key}
        self._blob, self._ends, self._seqs, self._added = "", [], [], rest

    def _loaded(self) -> Iterator[tuple[str, int]]:
        start = 0
        for end, seq in zip(self._ends, self._seqs, strict=True):
            yield self._blob[start:end], seq
            start = end

    def __iter__(self) -> Iterator[str]:
        for key, _ in self._loaded():
            if key not in self._added:
                yield key
        yield from self._added

    def __len__(self) -> int:
        shadowed = sum(1 for k in self._added if self._find(k) >= 0) if self._ends else 0
        return len(self._ends) + len(self._added) - shadowed

    @staticmethod
    def to_json(seen: Mapping[str, int]) -> dict[str, str]:
        """A map (this one or a dict) as three strings: ids sorted, so equal maps give
        equal snapshots."""
        if isinstance(seen, EventIds):
            merged = dict(seen._loaded())
            merged.update(seen._added)
        else:
            merged = dict(seen)
        ids = sorted(merged)
        ends: list[int] = []
        end = 0
        for key in ids:
            end += len(key)
            ends.append(end)
        return {"ids": "".join(ids), "ends": _text(ends), "seqs": _text([merged[k] for k in ids])}

    @classmethod
    def from_json(cls, data: Any) -> EventIds:
        """The map :meth:`to_json` wrote; ValueError when it is not one."""
        if not isinstance(data, dict) or not all(
            isinstance(data.get(k), str) for k in ("ids", "ends", "seqs")
        ):
            raise ValueError("event ids: not the snapshot's layout")
        try:
            ends, seqs = _ints(data["ends"]), _ints(data["seqs"])
        except ValueError as e:  # binascii.Error is one; a length not a multiple of 8 too
            raise ValueError(f"event ids: {e}") from e
        blob = data["ids"]
        if len(ends) != len(seqs) or (len(ends) and ends[-1] != len(blob)):
            raise ValueError("event ids: offsets do not fit the ids")
        if len(ends) and (ends[0] < 0 or bool((np.diff(ends) < 0).any())):
            raise ValueError("event ids: offsets go backwards")
        # Sorted as written: the snapshot's hash vouches for its bytes.
        out = cls()
        out._blob, out._ends, out._seqs = blob, ends.tolist(), seqs.tolist()
        return out
