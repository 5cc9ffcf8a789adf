"""The snapshot's verdict tables: a state loaded with them, then folded on, gives every
projection table equal to the one a full fold builds, whatever kind of event comes after
the cut (new runs and verdicts, a verdict told again out of log order, a run's request
after its verdicts, a judge's family registered, failures, human verdicts, controls,
retries), and damaged cache bytes are refused."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import pytest

from assay.config import Settings
from assay_aggregator import fold
from assay_aggregator.snapshot import load_snapshot, paths_for, save_snapshot
from assay_report import Projections
from assay_report.frame_cache import FrameCache
from assay_report.projections import TABLE_NAMES
from assay_report.state import State, state_from_json, state_to_json
from assay_schemas import (
    AgentSpec,
    DimensionScore,
    Event,
    JudgeRegistered,
    JudgeSpec,
    JudgmentRecorded,
    RunRequested,
    run_id_for,
)
from assay_testing.events import judgment_failed
from assay_testing.synthetic_log import synthetic_events

from .conftest import SPEC
from .test_controls_fold import DIMS, KEY, P, _log, _run, _verdict

Pairs = list[tuple[int, Event]]


def _keyed(pairs: Pairs) -> State:
    """The log folded by a reader holding the controls secret (controls opened)."""
    return fold(pairs, State(controls_key=KEY))


def _resumed(pairs: Pairs, cut: int) -> State:
    """What a report after a snapshot at `cut` folds: the state through JSON, its tables
    through bytes, then the rest of the log."""
    state = _keyed(pairs[:cut])
    cache = FrameCache.from_bytes(FrameCache.of(state, Projections(state).table).to_bytes())
    resumed = state_from_json(json.loads(json.dumps(state_to_json(state))))
    resumed.frame_cache = cache
    resumed.controls_key = KEY  # beside the state, as `load_snapshot` sets it
    return fold(pairs[cut:], resumed)


def _assert_equal_tables(pairs: Pairs, cuts: list[int]) -> list[set[str]]:
    want = Projections(_keyed(pairs)).tables()
    dirty = []
    for cut in cuts:
        p = Projections(_resumed(pairs, cut))
        for name in TABLE_NAMES:
            got = p.table(name)
            assert got.equals(want[name]), (cut, name)
        dirty.append(p._dirty if p._dirty is not None else set())
    return dirty


def test_every_cut_of_a_campaign_gives_the_full_fold_tables() -> None:
    events = list(synthetic_events(dataclasses.replace(SPEC, n_tasks=4)))
    pairs = list(enumerate(events, 1))
    cuts = sorted(
        {
            0,
            1,
            len(pairs) // 3,
            len(pairs) - 7,
            len(pairs) - 1,
            len(pairs),
            *range(0, len(pairs), max(1, len(pairs) // 9)),
        }
    )
    dirty = _assert_equal_tables(pairs, cuts)
    n_runs = len(_keyed(pairs).runs)
    # Late cuts rebuild a few runs, not all of them: the cache did serve.
    assert 0 < len(dirty[-2]) < n_runs and dirty[-1] == set()


def test_controls_human_verdicts_failures_and_retries_after_the_cut() -> None:
    events, _ = _log(n_tasks=4, humans=True)
    agent = AgentSpec(agent_id="agent", model="m")
    first = _run("t0", agent)
    rid = run_id_for("c1", "t0", "agent", 0, attempt=1)
    retry = first.model_copy(update={"event_id": "retry", "run_id": rid, "attempt": 1})
    failed = judgment_failed(first, "j2", 1, event_id="jf", error="timeout", attempts=2)
    events += [retry, failed, _verdict(retry, "j1", 7, "rv"), _verdict(first, "reviewer-x", 4, "h")]
    pairs = list(enumerate(events, 1))
    _assert_equal_tables(pairs, list(range(len(pairs) - 8, len(pairs) + 1)))


def test_a_verdict_told_again_out_of_log_order_replaces_the_cached_rows() -> None:
    events, _ = _log(n_tasks=3)
    # Sequences with a gap: the earlier verdict for a sample is folded after the cut.
    pairs: Pairs = [(10 * i, e) for i, e in enumerate(events, 1)]
    victim = next(e for _, e in pairs if isinstance(e, JudgmentRecorded))
    seq = next(s for s, e in pairs if e is victim)
    earlier = victim.model_copy(
        update={"event_id": "earlier", "scores": {d: DimensionScore(score=1) for d in DIMS}}
    )
    pairs.append((seq - 1, earlier))
    full = _keyed(pairs)
    assert full.verdicts[f"{victim.run_id}/{victim.judge_id}/0"].sequence == seq - 1
    _assert_equal_tables(pairs, [len(pairs) - 1])


def test_a_request_after_its_verdicts_and_a_family_registered_after_the_cut() -> None:
    events, _ = _log(n_tasks=3)
    request = next(e for e in events if isinstance(e, RunRequested))
    late = [e for e in events if e is not request] + [request]
    registered = JudgeRegistered(
        event_id="reg",
        campaign_id="c1",
        producer=P,
        judge=JudgeSpec(judge_id="j1", model="m1", family="fam-late"),
    )
    pairs = list(enumerate([*late, registered], 1))
    _assert_equal_tables(pairs, [len(pairs) - 2, len(pairs) - 1])
    want = Projections(fold(pairs)).table("judgments")
    assert "fam-late" in want["judge_family"].to_list()


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[:-10],
        lambda b: b"{}\n" + b.split(b"\n", 1)[1],
        lambda b: b.replace(b'"_keys"', b'"_kees"', 1),
        lambda b: b"no header" * 1000,
        lambda b: b.split(b"\n", 1)[0] + b"\n" + b"\x00" * (len(b) - b.index(b"\n") - 1),
    ],
)
def test_damaged_cache_bytes_are_refused(damage: Any) -> None:
    events, _ = _log(n_tasks=2)
    state = fold(enumerate(events, 1))
    data = FrameCache.of(state, Projections(state).table).to_bytes()
    assert FrameCache.from_bytes(data).keys.height == len(state.verdicts)
    with pytest.raises(ValueError, match="frame cache"):
        FrameCache.from_bytes(damage(data))


def test_a_snapshot_whose_tables_do_not_match_loads_without_them(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "assay.aggregator.snapshot")
    events, _ = _log(n_tasks=2)
    state = fold(enumerate(events, 1))
    save_snapshot(settings, state)
    loaded = load_snapshot(settings)
    assert loaded is not None and loaded.frame_cache is not None
    frames = paths_for(settings).frames
    frames.write_bytes(frames.read_bytes()[:-1] + b"!")
    loaded = load_snapshot(settings)
    assert loaded is not None and loaded.frame_cache is None
    assert "not the ones the snapshot names" in caplog.text
    frames.unlink()
    loaded = load_snapshot(settings)
    assert loaded is not None and loaded.frame_cache is None
    for name in TABLE_NAMES:
        assert Projections(loaded).table(name).equals(Projections(state).table(name))
