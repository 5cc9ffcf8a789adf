"""The applied events' id map as the snapshot stores it: any id text survives the round
trip, lookups after a load answer as the dict did, and a damaged layout is refused (the
snapshot is then ignored and the state rebuilt)."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import random

import numpy as np
import pytest

from assay.config import Settings
from assay_aggregator.snapshot import load_snapshot, paths_for, save_snapshot
from assay_report.event_ids import EventIds
from assay_report.state import State

HOSTILE = {
    "": 1,
    "plain-id": 2,
    'quote"and\\back': 3,
    "new\nline\x00nul": 4,
    "é非ascii🙂": 5,
    "\ud800lone": 6,  # a lone surrogate: json writes it, orjson will not read it
    "plain-id2": 7,
    "a" * 5000: 8,
}


def _through_json(seen: EventIds | dict[str, int]) -> EventIds:
    return EventIds.from_json(json.loads(json.dumps(EventIds.to_json(seen))))


def test_any_id_text_round_trips_and_is_found() -> None:
    loaded = _through_json(HOSTILE)
    assert dict(loaded) == HOSTILE and loaded == HOSTILE and len(loaded) == len(HOSTILE)
    for key, seq in HOSTILE.items():
        assert key in loaded and loaded[key] == seq and loaded.get(key) == seq
    # Prefixes and neighbours of stored ids are not stored ids.
    for missing in ("plain", "plain-id1", "plain-id3", "a" * 4999, "a" * 5001, "zzz", "\x00"):
        assert missing not in loaded and loaded.get(missing) is None
    assert 3 not in loaded and loaded.get(3) is None  # type: ignore[call-overload]
    with pytest.raises(KeyError):
        loaded["nope"]


def test_ids_added_after_a_load_join_the_loaded_ones_in_order() -> None:
    rng = random.Random(7)
    ids = {f"ev-{rng.getrandbits(64):016x}": i for i in range(1, 2001)}
    first = dict(list(ids.items())[:1500])
    loaded = _through_json(first)
    for key, seq in list(ids.items())[1500:]:
        assert key not in loaded
        loaded[key] = seq
    assert dict(loaded) == ids and len(loaded) == len(ids)
    assert EventIds.to_json(loaded) == EventIds.to_json(ids), "sorted: same map, same bytes"
    again = _through_json(loaded)
    assert all(again[k] == v for k, v in ids.items())
    key = next(iter(ids))
    del again[key]
    assert key not in again and len(again) == len(ids) - 1


def _ints(values: list[int]) -> str:
    return base64.b64encode(np.asarray(values, dtype="<i8").tobytes()).decode()


@pytest.mark.parametrize(
    "data",
    [
        {"ab": 1},  # the old layout: a dict of ids
        {"ids": "ab", "ends": _ints([1, 2])},
        {"ids": "ab", "ends": _ints([1, 2]), "seqs": _ints([1])},
        {"ids": "ab", "ends": _ints([1, 3]), "seqs": _ints([1, 2])},
        {"ids": "ab", "ends": _ints([2, 1]), "seqs": _ints([1, 2])},
        {"ids": "ab", "ends": "AAAA", "seqs": _ints([1])},
        {"ids": "ab", "ends": "not base64!", "seqs": _ints([1])},
        {"ids": 5, "ends": _ints([1]), "seqs": _ints([1])},
        ["ids", "ends", "seqs"],
    ],
)
def test_a_damaged_map_is_refused(data: object) -> None:
    with pytest.raises(ValueError, match="event ids"):
        EventIds.from_json(data)


def test_a_snapshot_with_a_damaged_map_is_ignored(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "assay.aggregator.snapshot")
    save_snapshot(settings, State(last_sequence=2, seen=EventIds({"x": 1, "y": 2})))
    loaded = load_snapshot(settings)
    assert loaded is not None and dict(loaded.seen) == {"x": 1, "y": 2}
    # Rewrite the body with offsets that overrun the ids, and a hash that matches it.
    path = paths_for(settings).snapshot
    head, body = path.read_bytes().split(b"\n", 1)
    data = json.loads(body)
    data["seen"]["ends"] = _ints([1, 9])
    new = json.dumps(data, separators=(",", ":")).encode()
    header = json.loads(head)
    header.update(sha256=hashlib.sha256(new).hexdigest(), size=len(new))
    path.write_bytes(json.dumps(header).encode() + b"\n" + new)
    assert load_snapshot(settings) is None and "offsets do not fit" in caplog.text
