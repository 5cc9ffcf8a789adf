"""Attack (issue #24, finding 13): costs, durations and latencies must be finite and ≥ 0.

NaN, ±Infinity and negative values used to be accepted, then flowed into cost tables as
inf/NaN and into report.json as ``null`` (the same as "undefined"). Every such field of
the schemas is listed here; a new one must be added (the class test looks them up).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    CampaignHistory,
    CampaignStopped,
    ExecOutcome,
    InvalidEvent,
    JudgmentRecorded,
    Limits,
    Price,
    StoppingSpec,
    ToolResultRecord,
    Usage,
    parse_event,
)

ENVELOPE: dict[str, Any] = {
    "event_id": "e",
    "campaign_id": "c",
    "run_id": "r",
    "task_id": "t",
    "producer": {"service": "test", "version": "0"},
}
BASE: dict[type[BaseModel], dict[str, Any]] = {
    CampaignHistory: {},
    AgentStepLogged: {**ENVELOPE, "step": 0},
    AgentFinished: {
        **ENVELOPE,
        "stop_reason": "submitted",
        "final_message": "",
        "steps": 0,
        "usage": Usage(),
    },
    JudgmentRecorded: {
        **ENVELOPE,
        "judge_id": "j",
        "sample": 0,
        "rubric_id": "r",
        "rubric_version": 1,
    },
    ToolResultRecord: {"call_id": "c", "name": "t", "output": ""},
    ExecOutcome: {"exit_code": 0, "stdout_b64": "", "stderr_b64": ""},
    Price: {},
    Limits: {},
    StoppingSpec: {"when": "ranking_settled"},
    CampaignStopped: {
        **ENVELOPE,
        "reason": "ranking_settled",
        "settled": True,
        "decided_at_sequence": 1,
    },
}
FIELDS = [
    (AgentStepLogged, "latency_ms"),
    (AgentStepLogged, "cost_usd"),
    (AgentFinished, "cost_usd"),
    (AgentFinished, "duration_s"),
    (JudgmentRecorded, "cost_usd"),
    (ToolResultRecord, "duration_ms"),
    (ExecOutcome, "duration_ms"),
    (Price, "input_per_mtok"),
    (Price, "output_per_mtok"),
    (Price, "cached_input_per_mtok"),
    (Price, "cache_write_per_mtok"),
    (Limits, "cost_budget_usd"),
    (CampaignHistory, "cost_usd"),
    (StoppingSpec, "max_cost_usd"),
    (CampaignStopped, "cost_usd"),
]
BAD = [float("nan"), float("inf"), float("-inf"), -0.5]


@pytest.mark.parametrize("model, field", FIELDS)
@pytest.mark.parametrize("bad", BAD, ids=["nan", "inf", "-inf", "negative"])
def test_non_finite_or_negative_amounts_are_refused(
    model: type[BaseModel], field: str, bad: float
) -> None:
    with pytest.raises(ValidationError, match=rf"(?m)^{field}$") as err:
        model.model_validate({**BASE[model], field: bad})
    assert err.value.error_count() == 1
    assert getattr(model.model_validate({**BASE[model], field: 0.0}), field) == 0.0


def test_every_cost_duration_and_latency_field_is_covered() -> None:
    """Class: any float field named like an amount of money or time is in FIELDS."""
    import assay_schemas

    named = ("cost", "duration", "latency", "per_mtok")
    found = {
        (cls, name)
        for cls in vars(assay_schemas).values()
        if isinstance(cls, type) and issubclass(cls, BaseModel)
        for name, info in cls.model_fields.items()
        if any(n in name for n in named)
        and name in cls.__annotations__
        and "float" in str(info.annotation)
    }
    assert found <= set(FIELDS), sorted((c.__name__, n) for c, n in found - set(FIELDS))


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", "-1"])
def test_events_on_the_wire_with_bad_costs_are_invalid(literal: str) -> None:
    body = json.dumps(
        {
            **ENVELOPE,
            "event_type": "AgentFinished",
            "stop_reason": "submitted",
            "final_message": "",
            "steps": 0,
            "usage": {},
            "cost_usd": 0.0,
        }
    )
    body = body.replace('"cost_usd": 0.0', f'"cost_usd": {literal}')
    with pytest.raises(InvalidEvent, match="cost_usd"):
        parse_event(body.encode(), subject="assay.ev.c.r")


# --- round two: token counts (and every other count) are never negative ----------------

COUNTS = [
    (Usage, "input_tokens"),
    (Usage, "output_tokens"),
    (Usage, "cached_tokens"),
    (AgentStepLogged, "step"),
    (AgentFinished, "steps"),
]


@pytest.mark.parametrize("model, field", COUNTS)
def test_negative_counts_are_refused(model: type[BaseModel], field: str) -> None:
    base = BASE.get(model, {})
    with pytest.raises(ValidationError, match=rf"(?m)^{field}$") as err:
        model.model_validate({**base, field: -1})
    assert err.value.error_count() == 1
    assert getattr(model.model_validate({**base, field: 0}), field) == 0


def test_an_event_on_the_wire_with_negative_tokens_is_invalid() -> None:
    body = json.dumps(
        {
            **ENVELOPE,
            "event_type": "AgentFinished",
            "stop_reason": "submitted",
            "final_message": "",
            "steps": 0,
            "cost_usd": 0.0,
            "usage": {"input_tokens": 10, "output_tokens": -5},
        }
    )
    with pytest.raises(InvalidEvent, match="output_tokens"):
        parse_event(body.encode(), subject="assay.ev.c.r")


def _non_negative(bound: object) -> bool:
    import annotated_types

    low = getattr(bound, "ge", None) if isinstance(bound, annotated_types.Ge) else None
    low = getattr(bound, "gt", None) if isinstance(bound, annotated_types.Gt) else low
    return isinstance(low, int | float) and low >= 0


def test_every_count_field_is_non_negative() -> None:
    """Class: any int field named like a count (tokens, steps, size, n_…, …count) has ge ≥ 0."""
    import assay_schemas

    named = ("tokens", "step", "size", "count", "n_")
    missing = sorted(
        (cls.__name__, name)
        for cls in vars(assay_schemas).values()
        if isinstance(cls, type) and issubclass(cls, BaseModel)
        for name, info in cls.model_fields.items()
        if any(name.startswith(n) if n == "n_" else n in name for n in named)
        and "int" in str(info.annotation)
        and "float" not in str(info.annotation)
        and not any(_non_negative(m) for m in info.metadata)
    )
    assert not missing, missing
