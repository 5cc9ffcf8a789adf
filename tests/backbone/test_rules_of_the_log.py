"""The rules of the log live once, in `assay_schemas` (issue #49): what the runner
schedules is what the campaign's history expects, the bus, the permissions and the decoder
name the same subjects, and a judge owes what the counting rule counts."""

from __future__ import annotations

import pytest

from assay.bus import Subjects
from assay.security.permissions import role_permissions
from assay_runner.scheduler import plan_runs
from assay_schemas import (
    NO_RUN,
    CampaignHistory,
    CampaignStarted,
    InvalidEvent,
    Producer,
    Task,
    TaskSubmitted,
    event_subject,
    expected_runs,
    parse_event,
    parse_event_subject,
    samples_owed,
)
from assay_testing.pipeline import campaign, scripted_agent

PRODUCER = Producer(service="test", version="1")
SPEC = campaign(
    "c1",
    [scripted_agent("a1", "m", "http://x"), scripted_agent("a2", "m", "http://x")],
    epochs=3,
)
TASK = Task(task_id="t1", prompt="count")


def test_the_runner_schedules_the_runs_the_history_expects() -> None:
    planned = plan_runs(SPEC, TASK, producer=PRODUCER, cause="submission")
    history = CampaignHistory(campaign_id="c1")
    history.apply(
        CampaignStarted(event_id="e1", campaign_id="c1", campaign=SPEC, producer=PRODUCER)
    )
    history.apply(
        TaskSubmitted(event_id="e2", campaign_id="c1", task_id="t1", task=TASK, producer=PRODUCER)
    )
    ids = [r.run_id for r in planned]
    assert len(ids) == 6 == len(set(ids))
    assert ids == [run.run_id for run in expected_runs(SPEC, "t1")]
    assert history.expected == set(ids)


def test_every_writer_and_reader_names_the_same_subjects() -> None:
    subjects = Subjects(prefix="p")
    event = TaskSubmitted(
        event_id="e2", campaign_id="c1", task_id="t1", task=TASK, producer=PRODUCER
    )
    subject = subjects.of(event)
    assert subject == event_subject("p", "TaskSubmitted", "c1", NO_RUN)
    assert tuple(parse_event_subject(subject) or ()) == ("p", "TaskSubmitted", "c1", NO_RUN)
    assert parse_event(event.model_dump_json(), subject=subject) == event
    with pytest.raises(InvalidEvent):
        parse_event(
            event.model_dump_json(), subject=event_subject("p", "TaskSubmitted", "c2", NO_RUN)
        )
    publisher = role_permissions("publisher", prefix="p", stream="S", campaign="c1")
    assert subject in publisher.publish
    assert parse_event_subject("p.dlq.runner-tasks") is None


def test_a_task_asks_a_judge_for_more_samples_never_fewer() -> None:
    assert samples_owed(3, 1) == 3
    assert samples_owed(1, 4) == 4
    assert samples_owed(2) == 2
