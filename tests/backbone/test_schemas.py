"""Contracts: events round-trip, ids are deterministic, old payloads upcast, exports are fresh."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay_schemas import (
    EVENT_TYPES,
    SCHEMA_DIR,
    AgentSpec,
    AgentStepLogged,
    CampaignSpec,
    ErrorInfo,
    InvalidEvent,
    InvalidInput,
    JudgmentFailed,
    Producer,
    Rubric,
    RunFailed,
    default_rubric,
    derive_id,
    load_rubric,
    parse_event,
    render_schemas,
    run_id_for,
)
from assay_testing.events import campaign_started

PRODUCER = Producer(service="test", version="0")


def test_every_event_type_is_in_the_union_and_round_trips() -> None:
    campaign = CampaignSpec(campaign_id="c1", agents=[AgentSpec(agent_id="a1", model="m")])
    event = campaign_started(campaign, producer=PRODUCER)
    again = parse_event(event.model_dump_json())
    assert again == event
    assert set(EVENT_TYPES) >= {
        "CampaignStarted",
        "TaskSubmitted",
        "RunRequested",
        "SandboxReady",
        "AgentStepLogged",
        "AgentFinished",
        "ArtifactsSealed",
        "JudgeRegistered",
        "JudgmentRecorded",
        "JudgmentFailed",
        "RunFailed",
    }


def test_events_are_frozen_and_utc() -> None:
    event = _step(0)
    with pytest.raises(Exception, match="frozen"):
        event.step = 3  # type: ignore[misc]
    assert event.occurred_at.utcoffset() is not None
    assert event.occurred_at.utcoffset().total_seconds() == 0  # type: ignore[union-attr]


def _step(n: int) -> AgentStepLogged:
    return AgentStepLogged(
        event_id=AgentStepLogged.id_for("r1", n),
        campaign_id="c1",
        run_id="r1",
        step=n,
        producer=PRODUCER,
    )


def test_ids_are_derived_from_the_cause() -> None:
    a, b, c = _step(3), _step(3), _step(4)
    assert a.event_id == b.event_id != c.event_id
    assert run_id_for("c1", "t1", "a1", 0) == run_id_for("c1", "t1", "a1", 0)
    assert run_id_for("c1", "t1", "a1", 0) != run_id_for("c1", "t1", "a1", 1)
    assert derive_id("x", 1, 2) != derive_id("x", 12)


def test_older_step_payload_is_upcast() -> None:
    old = {
        "event_id": "e1",
        "event_type": "AgentStepLogged",
        "schema_version": 1,
        "occurred_at": "2026-01-01T00:00:00Z",
        "campaign_id": "c1",
        "run_id": "r1",
        "producer": {"service": "runner", "version": "0.0.1"},
        "step": 2,
        "input_tokens": 120,
        "output_tokens": 30,
    }
    event = parse_event(json.dumps(old))
    assert isinstance(event, AgentStepLogged)
    assert event.schema_version == 2
    assert (event.usage.input_tokens, event.usage.output_tokens) == (120, 30)


@pytest.mark.parametrize(
    "error, info",
    [
        (
            "ProviderUnavailable: unavailable: 503",
            ErrorInfo(error_class="ProviderUnavailable", message="unavailable: 503"),
        ),
        ("Pkg.Gone: x", ErrorInfo(error_class="Pkg.Gone", message="x")),
        ("assay.Gone: x", ErrorInfo(message="assay.Gone: x")),
        (
            "no valid verdict: missing dimension",
            ErrorInfo(message="no valid verdict: missing dimension"),
        ),
        (
            "sandbox disappeared: SandboxGone: x",
            ErrorInfo(message="sandbox disappeared: SandboxGone: x"),
        ),
        ("Not a class: x", ErrorInfo(message="Not a class: x")),
        ("ÉcoleError: x", ErrorInfo(message="ÉcoleError: x")),
        ("KeyError:'k'", ErrorInfo(message="KeyError:'k'")),
    ],
)
@pytest.mark.parametrize("logged_as", ["absent", "null"])
def test_a_failure_logged_before_error_info_is_given_the_one_its_text_meant(
    error: str, info: ErrorInfo, logged_as: str
) -> None:
    old = {
        "event_id": "e1",
        "event_type": "JudgmentFailed",
        "occurred_at": "2026-01-01T00:00:00Z",
        "campaign_id": "c1",
        "run_id": "r1",
        "producer": {"service": "judge", "version": "0.0.1"},
        "judge_id": "j1",
        "sample": 0,
        "attempts": 1,
        "error": error,
        **({"error_info": None} if logged_as == "null" else {}),
    }
    event = parse_event(json.dumps(old), subject="assay.ev.JudgmentFailed.c1.r1")
    assert isinstance(event, JudgmentFailed)
    assert event.error_info == info and event.error == error  # the text as it was logged


def test_a_failures_own_error_info_is_kept_whatever_its_text_says() -> None:
    info = ErrorInfo(error_class="SandboxGone", message="gone")
    failed = RunFailed(
        event_id="e1",
        campaign_id="c1",
        run_id="r1",
        producer=PRODUCER,
        stage="agent",
        error="ProviderError: something else",
        error_info=info,
        infrastructure=True,
    )
    assert parse_event(failed.model_dump_json()).error_info == info  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "payload, match",
    [
        (b"\x00garbage", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"event_type": "NoSuchThing"}', "invalid"),
        (b'{"event_type": "AgentStepLogged", "event_id": "e"}', "AgentStepLogged event"),
        (b'{"event_type": "AgentStepLogged", "schema_version": 99}', "newer than this code"),
    ],
)
def test_bad_payloads_raise_invalid_event(payload: bytes, match: str) -> None:
    with pytest.raises(InvalidEvent, match=match):
        parse_event(payload, subject="assay.ev.x.c.r")


def test_ids_must_be_safe_subject_tokens() -> None:
    with pytest.raises(ValueError, match="campaign_id"):
        CampaignSpec(campaign_id="bad.id", agents=[AgentSpec(agent_id="a", model="m")])


def test_committed_json_schemas_are_fresh() -> None:
    rendered = render_schemas()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in SCHEMA_DIR.glob("*.json")}
    stale = sorted(n for n in rendered.keys() | on_disk.keys() if rendered.get(n) != on_disk.get(n))
    assert not stale, f"run `assay schemas export`: stale schema files {stale}"


def test_default_rubric_has_8_dimensions_and_16_tags_anchored_at_8() -> None:
    rubric = default_rubric()
    assert len(rubric.dimensions) == 8 and len(rubric.failure_tags) == 16
    assert (
        "communication" in rubric.dimension_keys and "scientific_accuracy" in rubric.dimension_keys
    )
    for dim in rubric.dimensions:
        assert "minor edits" in dim.anchors[8]
        assert "ublication grade" in dim.anchors[9] and "ublication grade" in dim.anchors[10]
    assert {
        "overclaiming",
        "no_artifacts",
        "fabricated_results",
        "analysis_not_executed",
        "ignored_attachment",
        "misread_data",
        "wrong_method",
    } <= set(rubric.tag_keys)


def test_rubric_loads_from_yaml_and_toml(tmp_path: Path) -> None:
    import yaml

    data = default_rubric().model_dump(mode="json")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(data))
    assert load_rubric(tmp_path / "r.yaml") == default_rubric()
    (tmp_path / "r.toml").write_text(
        'rubric_id = "mini"\n[[dimensions]]\nkey = "accuracy"\nname = "Accuracy"\n'
        'description = "d"\nanchors = { 8 = "minor edits", 0 = "wrong" }\n'
    )
    mini = load_rubric(tmp_path / "r.toml")
    assert isinstance(mini, Rubric) and mini.dimension_keys == ["accuracy"]
    (tmp_path / "bad.yaml").write_text(
        "dimensions: [{key: x, name: X, description: d, anchors: {1: a}}]"
    )
    with pytest.raises(InvalidInput, match=r"bad\.yaml.*anchors must define 8"):
        load_rubric(tmp_path / "bad.yaml")


def test_an_events_id_is_derived_from_its_type_and_cause_as_it_always_was() -> None:
    """Ids stay byte-identical: a replayed or retried publish dedupes against old logs."""
    for event_type, cls in EVENT_TYPES.items():
        assert cls.id_for("c", "r", 2) == derive_id(event_type, "c", "r", 2)
    assert RunFailed.id_for("r1", "agent") == derive_id("RunFailed", "r1", "agent")


def test_an_invalid_event_says_per_field_what_is_wrong_in_plain_sentences() -> None:
    """A publisher reads the refusal: each fault names its field, with no pydantic dump
    (no union tags, no documentation links, no echo of the values sent)."""
    body = {
        "event_type": "TaskSubmitted",
        "event_id": "e1",
        "campaign_id": "c1",
        "task_id": "t1",
        "producer": {"service": "outside", "version": "1"},
        "task": {"task_id": "t1", "prompt": 42, "secret_value_echo": "x" * 500},
    }
    with pytest.raises(InvalidEvent) as caught:
        parse_event(json.dumps(body).encode(), subject="assay.ev.TaskSubmitted.c1.-")
    detail = str(caught.value)
    assert "errors.pydantic.dev" not in detail and "tagged-union" not in detail
    assert "x" * 100 not in detail
    assert "task.prompt: " in detail and "task.secret_value_echo: " in detail
    assert detail.startswith("TaskSubmitted event on assay.ev.TaskSubmitted.c1.-")


def test_an_invalid_event_with_a_flood_of_faults_names_a_bounded_number() -> None:
    """A hostile body with thousands of unknown keys gets a short answer."""
    task = {"task_id": "t1", "prompt": "p", **{f"k{i}" * 20: i for i in range(3000)}}
    body = {"event_type": "TaskSubmitted", "event_id": "e1", "campaign_id": "c1", "task": task}
    with pytest.raises(InvalidEvent) as caught:
        parse_event(json.dumps(body).encode())
    detail = str(caught.value)
    assert len(detail) < 2000 and "more" in detail
