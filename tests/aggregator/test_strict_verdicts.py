"""Strict verdicts: integer scores only, rubric dimensions only, no rating given twice."""

from __future__ import annotations

import json

import polars as pl
import pytest
from pydantic import ValidationError

from assay_aggregator import fold
from assay_report import Projections
from assay_report import statistics as st
from assay_schemas import DimensionScore, JudgmentRecorded
from assay_testing.synthetic_tables import synthetic_tables

from .conftest import Published


@pytest.mark.parametrize("score", [True, 7.0, "7", 7.5, 11, -1])
def test_dimension_score_is_never_coerced(score: object) -> None:
    with pytest.raises(ValidationError):
        DimensionScore.model_validate({"score": score})
    with pytest.raises(ValidationError):
        DimensionScore.model_validate_json(json.dumps({"score": score}))


def test_a_dimension_outside_the_rubric_is_refused_by_the_fold(published: Published) -> None:
    pairs = list(enumerate(published.events, 1))
    at, first = next((i, e) for i, e in pairs if isinstance(e, JudgmentRecorded) and e.scores)
    forged = first.model_copy(
        update={"scores": {**first.scores, "charisma": DimensionScore(score=10)}}
    )
    state = fold([(i, forged if i == at else e) for i, e in pairs])
    [refused] = state.refused.values()
    assert refused.sequence == at and "charisma" in refused.reason
    judgments = Projections(state).table("judgments")
    assert "charisma" not in judgments["dimension"].to_list()
    assert judgments.filter(pl.col("sequence") == at).height == 0


def test_a_rating_given_twice_is_refused_not_averaged() -> None:
    t = synthetic_tables(n_tasks=3, n_agents=2, seed=1)
    twice = pl.concat([t.ratings, t.ratings.head(1).with_columns(score=pl.lit(0, pl.Int64))])
    with pytest.raises(st.StatisticsInputError, match="rated more than once"):
        st.make_tables(twice, t.runs)
