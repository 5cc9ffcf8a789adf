"""Projections folded from a generated log on the real server: counts, idempotence, order."""

from __future__ import annotations

import random
from dataclasses import replace

import polars as pl

from assay.bus import Bus
from assay_aggregator import apply, fold
from assay_aggregator.rebuild import fold_stream
from assay_report import Projections, State
from assay_report.table_schemas import SCHEMAS, TABLE_NAMES, frame_of_rows
from assay_schemas import RULES_JUDGE_ID, ArtifactsSealed, JudgmentRecorded, RunFailed, RunRequested

from .conftest import SPEC, Published


async def _rebuild(bus: Bus) -> Projections:
    state = await fold_stream(bus.js, bus.stream.name, bus.subjects.events)
    return Projections(state)


async def test_projections_match_the_generated_log(bus: Bus, published: Published) -> None:
    p = await _rebuild(bus)
    events = published.events
    assert p.state.last_sequence == published.head
    runs = p.table("runs")
    assert runs.height == sum(isinstance(e, RunRequested) for e in events) == 30
    infra = {e.run_id for e in events if isinstance(e, RunFailed) and e.infrastructure}
    assert set(runs.filter(pl.col("infrastructure_failure"))["run_id"]) == infra
    assert set(runs.filter(pl.col("state") == "failed")["run_id"]) == infra
    sealed = [e for e in events if isinstance(e, ArtifactsSealed)]
    empty = {e.run_id for e in sealed if len(e.files) == 1}  # only the attachment
    assert set(runs.filter(pl.col("empty_artifacts"))["run_id"]) == empty
    assert runs.filter(pl.col("sealed"))["n_artifacts"].min() is not None
    # Long form: run × judge × sample × dimension, never for the rule judge.
    judgments = p.table("judgments")
    llm = [e for e in events if isinstance(e, JudgmentRecorded) and e.judge_id != RULES_JUDGE_ID]
    assert judgments.height == sum(len(e.scores) for e in llm) == len(sealed) * 2 * 2 * 8
    assert RULES_JUDGE_ID not in judgments["judge_id"].to_list()
    # The rule judge's tags and checks are kept.
    tags = p.table("tags")
    assert tags.filter(pl.col("judge_id") == RULES_JUDGE_ID).height >= len(empty)
    assert p.table("checks").height == 2 * len(sealed)
    steps = p.table("steps")
    assert steps["n_steps"].unique().to_list() == [SPEC.steps_per_run]
    assert set(p.table("judges")["judge_id"]) == {"judge_a", "judge_b", RULES_JUDGE_ID}
    artifacts = p.table("artifacts")
    assert artifacts.filter(pl.col("is_attachment")).height == len(sealed)
    # Statistics inputs: every rated run is a known run; ratings exclude the rule judge.
    tables = p.statistics_tables()
    assert tables.ratings.height == judgments.height
    assert tables.runs.height == runs.height


def test_same_events_twice_give_the_same_tables(published: Published) -> None:
    pairs = list(enumerate(published.events, 1))
    once = fold(pairs)
    twice = fold(pairs, fold(pairs))
    assert twice.applied == once.applied == len(pairs)
    assert not apply(twice, 1, published.events[0])
    a, b = Projections(once).tables(), Projections(twice).tables()
    for name in a:
        assert a[name].equals(b[name]), name


def test_arrival_order_does_not_change_the_tables(published: Published) -> None:
    pairs = list(enumerate(published.events, 1))
    shuffled = pairs[:]
    random.Random(7).shuffle(shuffled)
    a, b = Projections(fold(pairs)).tables(), Projections(fold(shuffled)).tables()
    for name in a:
        assert a[name].equals(b[name]), name


def test_empty_state_has_typed_empty_tables() -> None:
    p = Projections(State())
    for name, df in p.tables().items():
        assert df.height == 0, name
    assert p.table("runs").schema["infrastructure_failure"] == pl.Boolean


def test_judgments_are_every_scored_verdict_by_dimension(published: Published) -> None:
    """The judgments table (built by columns) against a plain row per score: every
    scored verdict in (run, judge, sample) order, its dimensions sorted, the run's task
    and agent, the judge's registered family; unscored verdicts give no row."""
    state = fold(list(enumerate(published.events, 1)))
    key = next(k for k, v in state.verdicts.items() if v.scores and v.judge_id != RULES_JUDGE_ID)
    state.verdicts[key] = replace(state.verdicts[key], scores={})  # no scores, no rows
    p = Projections(state)
    want = []
    for v in sorted(state.verdicts.values(), key=lambda v: (v.run_id, v.judge_id, v.sample)):
        run = state.runs[v.run_id]
        family = state.judges[v.judge_id].family or v.judge_family
        for dim in sorted(v.scores):
            want.append(
                (
                    v.campaign_id,
                    run.task_id,
                    v.run_id,
                    run.agent_id,
                    v.judge_id,
                    family,
                    v.judge_model,
                    v.sample,
                    dim,
                    v.scores[dim],
                    v.sequence,
                )
            )
    got = p.table("judgments")
    assert got.rows() == want and len(want) > 0
    assert got.schema["score"] == pl.Int64 and got.schema["dimension"] == pl.String
    run_id, judge_id, sample = key.split("/")
    assert (run_id, judge_id, int(sample)) not in set(
        got.select("run_id", "judge_id", "sample").rows()
    )


async def test_tables_built_by_columns_equal_polars_rows(bus: Bus, published: Published) -> None:
    """`frame_of_rows` is polars' row orientation by columns: the same frame, casts and
    nulls included, for every table built from rows (and for none at all)."""
    p = await _rebuild(bus)
    built = 0
    for name in TABLE_NAMES:
        rows_of = getattr(p, f"_{name}_rows", None)
        if rows_of is None:
            continue
        rows = rows_of()
        expected = pl.DataFrame(rows, schema=SCHEMAS[name], orient="row")
        assert frame_of_rows(rows, SCHEMAS[name]).equals(expected), name
        assert frame_of_rows([], SCHEMAS[name]).equals(expected.clear()), name
        built += bool(rows)
    assert built >= 5
    mixed = {"a": pl.Float64, "b": pl.Int64, "c": pl.String, "d": pl.Boolean}
    rows = [(1, 2.0, "x", True), (2.5, None, None, False)]
    assert frame_of_rows(rows, mixed).equals(pl.DataFrame(rows, schema=mixed, orient="row"))
