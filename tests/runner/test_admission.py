"""Every TaskSubmitted is answered: TaskAccepted (runs scheduled) or TaskRejected (why)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

from assay.bus import Bus, read_campaign
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.store import LocalBlobStore, ensure_upload_bucket, upload_blob, upload_bucket
from assay.tasks import load_tasks
from assay_schemas import (
    Event,
    FileRef,
    Producer,
    RunRequested,
    Task,
    TaskAccepted,
    TaskRejected,
    TaskSubmitted,
    TextContainsCheck,
)
from assay_testing.events import campaign_started
from assay_testing.pipeline import campaign, scripted_agent, services, wait_for_events, write_task

OUTSIDE = Producer(service="outside", version="1")


def submission(campaign_id: str, task: Task, tag: str = "") -> TaskSubmitted:
    return TaskSubmitted(
        event_id=TaskSubmitted.id_for(campaign_id, task.task_id, tag),
        campaign_id=campaign_id,
        task_id=task.task_id,
        task=task,
        producer=OUTSIDE,
    )


def answers(events: list[Event]) -> list[TaskAccepted | TaskRejected]:
    return [e for e in events if isinstance(e, TaskAccepted | TaskRejected)]


def answered(n: int):  # type: ignore[no-untyped-def]
    return lambda events: len(answers(events)) >= n


def ref(data: bytes, path: str = "data.csv") -> FileRef:
    return FileRef(path=path, sha256=hashlib.sha256(data).hexdigest(), size=len(data))


async def right_and_forged(bus: Bus, data: bytes, forged: FileRef) -> TaskRejected:
    """Two tasks submitted to c1, one attaching `data` under its own hash (accepted), one
    attaching `forged` (rejected: the stored bytes are not what the name promises)."""
    ok = submission("c1", Task(task_id="t1", prompt="p", attachments=[ref(data)]))
    bad = submission("c1", Task(task_id="t2", prompt="p", attachments=[forged]))
    await bus.publish(ok)
    await bus.publish(bad)
    events = await wait_for_events(bus, answered(2))
    by_submission = {a.submission: a for a in answers(events)}
    assert isinstance(by_submission[ok.event_id], TaskAccepted)
    rejected = by_submission[bad.event_id]
    assert isinstance(rejected, TaskRejected) and rejected.reason == "blob_mismatch"
    return rejected


async def start_campaign(bus: Bus) -> None:
    spec = campaign("c1", [scripted_agent("a1", "m", "http://127.0.0.1:9")], epochs=2)
    await bus.publish(campaign_started(spec, producer=OUTSIDE))


async def test_a_valid_task_is_accepted_with_its_runs(
    bus: Bus, settings: Settings, tmp_path: Path
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    folder = write_task(tmp_path / "tasks", "t1", "analyse", {"data.csv": "x\n1\n"})
    spec = campaign("c1", [scripted_agent("a1", "m", "http://127.0.0.1:9")], epochs=2)
    async with services(settings, store, names=("runner",)):
        [task] = await submit_campaign(bus, store, spec, load_tasks(folder, max_bytes=10_000))
        events = await wait_for_events(bus, answered(1))
        events = await wait_for_events(
            bus, lambda evs: sum(isinstance(e, RunRequested) for e in evs) == 2
        )
    [accepted] = answers(events)
    assert isinstance(accepted, TaskAccepted) and accepted.task_id == task.task_id
    submitted = next(e for e in events if isinstance(e, TaskSubmitted))
    assert accepted.submission == submitted.event_id == accepted.causation_id
    assert sorted(accepted.run_ids) == sorted(
        e.run_id for e in events if isinstance(e, RunRequested)
    )


async def test_refusals_name_their_reason_and_schedule_nothing(
    bus: Bus, settings: Settings
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    present = store.put_bytes(b"x\n1\n")
    store.put_bytes(b"x\n2\n")
    good = Task(task_id="t1", prompt="p", attachments=[ref(b"x\n1\n")])
    cases = {
        "missing_blob": submission(
            "c1", Task(task_id="t2", prompt="p", attachments=[ref(b"nope")])
        ),
        "blob_mismatch": submission(
            "c1",
            Task(
                task_id="t3",
                prompt="p",
                attachments=[FileRef(path="d", sha256=present.sha256, size=99)],
            ),
        ),
        "unknown_campaign": submission("c9", good),
        "duplicate": submission("c1", good.model_copy(update={"prompt": "other"}), "2"),
    }
    async with services(settings, store, names=("runner",)):
        await start_campaign(bus)
        await bus.publish(submission("c1", good))
        await wait_for_events(bus, answered(1))
        for event in cases.values():
            await bus.publish(event)
        # The same task again under another event id: accepted, nothing scheduled twice.
        await bus.publish(submission("c1", good, "again"))
        events = await wait_for_events(bus, answered(6))
    by_submission = {a.submission: a for a in answers(events)}
    for reason, event in cases.items():
        rejected = by_submission[event.event_id]
        assert isinstance(rejected, TaskRejected) and rejected.reason == reason, rejected
        assert rejected.task_id == event.task.task_id and rejected.detail
    assert isinstance(by_submission[submission("c1", good, "again").event_id], TaskAccepted)
    runs = [e for e in events if isinstance(e, RunRequested)]
    assert {r.task_id for r in runs} == {"t1"} and len(runs) == 2


async def test_submissions_racing_for_one_task_id_get_one_acceptance(
    bus: Bus, settings: Settings
) -> None:
    """Admissions run side by side (`ADMISSIONS_IN_FLIGHT`): a publisher that sends several
    different tasks under one id at once, to have another prompt run under an accepted
    task's name, gets one of them accepted and the rest refused as duplicates, with runs
    of the accepted one only. Other tasks among them are admitted as usual."""
    rivals = [
        submission("c1", Task(task_id="t1", prompt=f"variant {i}"), f"rival-{i}") for i in range(8)
    ]
    others = [submission("c1", Task(task_id=f"o{i}", prompt="p")) for i in range(8)]
    await start_campaign(bus)
    for rival, other in zip(rivals, others, strict=True):
        await bus.publish(rival)
        await bus.publish(other)
    # Stored before the runner starts: its first pulls take them all at once.
    async with services(settings, LocalBlobStore(settings.blob_dir), names=("runner",)):
        events = await wait_for_events(bus, answered(len(rivals) + len(others)))
        events = await wait_for_events(
            bus, lambda evs: sum(isinstance(e, RunRequested) for e in evs) >= 2 * 9
        )
    by_submission = {a.submission: a for a in answers(events)}
    accepted = [r for r in rivals if isinstance(by_submission[r.event_id], TaskAccepted)]
    assert len(accepted) == 1, [by_submission[r.event_id] for r in rivals]
    for rival in rivals:
        answer = by_submission[rival.event_id]
        assert isinstance(answer, TaskAccepted) or answer.reason == "duplicate", answer
    assert all(isinstance(by_submission[o.event_id], TaskAccepted) for o in others)
    runs = [e for e in events if isinstance(e, RunRequested) and e.task_id == "t1"]
    assert len(runs) == 2 and all(r.task == accepted[0].task for r in runs)


async def test_two_runners_sharing_the_submissions_give_one_acceptance_per_task_id(
    bus: Bus, settings: Settings
) -> None:
    """Two runners on the durable: forty rivals under one id, one accepted in all."""
    from assay_runner.service import build

    rivals = [
        submission("c1", Task(task_id="t1", prompt=f"variant {i}"), f"rival-{i}") for i in range(40)
    ]
    await start_campaign(bus)
    for rival in rivals:
        await bus.publish(rival)
    store = LocalBlobStore(settings.blob_dir)
    runners = [build(settings, store=store) for _ in range(2)]
    try:
        await asyncio.gather(*(r.start() for r in runners))
        events = await wait_for_events(bus, answered(len(rivals)))
    finally:
        await asyncio.gather(*(r.stop() for r in runners))
    by_submission = {a.submission: a for a in answers(events)}
    accepted = [r for r in rivals if isinstance(by_submission[r.event_id], TaskAccepted)]
    assert len(accepted) == 1, len(accepted)
    runs = [e for e in events if isinstance(e, RunRequested)]
    assert len(runs) == 2 and all(r.task == accepted[0].task for r in runs)


async def test_a_runner_that_loses_the_race_for_a_task_id_does_not_request_its_runs(
    bus: Bus, settings: Settings
) -> None:
    """The per-task lock is one process's. Runner B checks the id and finds it free;
    runner A, meanwhile, admits a different task under it in full; B's runs must then not
    be requested, and B learns whose request holds them (it refuses its task with that).
    Before, B published its answer first and its requests after, deduplicated away:
    its publisher was told "accepted" while the other task ran under the id."""
    from assay_runner.admission import Stored
    from assay_runner.scheduler import plan_runs
    from assay_runner.service import build

    await start_campaign(bus)
    campaign = await read_campaign(bus, "c1")
    assert campaign is not None
    rival_a, rival_b = (
        submission("c1", Task(task_id="t1", prompt=f"variant {k}"), k) for k in "ab"
    )
    a, b = build(settings), build(settings)
    try:
        await a.bus.start()
        await b.bus.start()
        subject = bus.subjects.event("TaskSubmitted", "c1", "-")
        assert await b.admission.rejection(rival_b, campaign, Stored(2, subject, b"", {})) is None
        await a._admit(campaign, rival_a, Stored(1, subject, b"", {}))
        runs = plan_runs(campaign, rival_b.task, producer=b.bus.producer, cause=rival_b.event_id)
        taken = await b._schedule(runs)
    finally:
        await a.bus.stop()
        await b.bus.stop()
    assert taken is not None and taken.task == rival_a.task
    rejected = b.admission.taken(rival_b, 2, taken)
    assert rejected.reason == "duplicate" and rival_a.event_id in rejected.detail
    events = [e.event async for e in bus.replay()]
    requested = [e for e in events if isinstance(e, RunRequested)]
    assert len(requested) == 2 and all(r.task == rival_a.task for r in requested)


async def test_an_invalid_message_is_answered_on_its_campaign(bus: Bus, settings: Settings) -> None:
    body = submission("c1", Task(task_id="t1", prompt="p")).model_dump(mode="json")
    del body["event_type"]
    async with services(settings, LocalBlobStore(settings.blob_dir), names=("runner",)):
        await bus.broker.publish(
            json.dumps(body).encode(), bus.subjects.event("TaskSubmitted", "c1", "-")
        )
        events = await wait_for_events(bus, answered(1))
    [rejected] = answers(events)
    assert isinstance(rejected, TaskRejected) and rejected.reason == "invalid"
    assert rejected.campaign_id == "c1" and rejected.task_id == "t1"
    assert rejected.submission == body["event_id"] and "event_type" in rejected.detail


async def test_uploaded_blobs_are_imported_verified(bus: Bus, settings: Settings) -> None:
    store = LocalBlobStore(settings.blob_dir)
    bucket = upload_bucket(settings, "c1")
    objects = await ensure_upload_bucket(bus.js, bucket)
    data = b"strain,od\nA,0.5\n"
    await upload_blob(bus.js, bucket, data)
    forged = ref(b"what the name promises")
    await objects.put(forged.sha256, b"other bytes")
    async with services(settings, store, names=("runner",)):
        await start_campaign(bus)
        await right_and_forged(bus, data, forged)
    assert store.get_bytes(ref(data).sha256) == data
    assert not store.exists(forged.sha256)


# --- issue #24, finding 10: the bus door applies every check `assay submit` applies ------


def _with_pattern(task_id: str, pattern: str) -> Task:
    check = TextContainsCheck(name="says", path="out/report.md", pattern=pattern)
    return Task(task_id=task_id, prompt="p", reference_checks=[check])


REFUSED_AT_SUBMIT = {
    "look-behind": _with_pattern("t1", r"(?<=total: )\d+"),
    "negative look-behind": _with_pattern("t2", r"(?<!not )significant"),
    "look-ahead": _with_pattern("t3", r"growth(?= rate)"),
    "backreference": _with_pattern("t4", r"(\w+) \1"),
    "path escaping the workspace": Task(
        task_id="t5", prompt="p", attachments=[ref(b"x\n1\n", "../../etc/data.csv")]
    ),
    "absolute path": Task(task_id="t6", prompt="p", attachments=[ref(b"x\n1\n", "/etc/passwd")]),
    "names differing in case": Task(
        task_id="t7", prompt="p", attachments=[ref(b"x\n1\n", "Data.csv"), ref(b"x\n1\n")]
    ),
}


async def test_a_task_assay_submit_refuses_is_refused_on_the_bus(
    bus: Bus, settings: Settings
) -> None:
    """RE2 cannot run look-arounds or backreferences: a publisher's task carrying one was
    accepted and every run then failed its rule judge. Paths and case-twins likewise."""
    store = LocalBlobStore(settings.blob_dir)
    store.put_bytes(b"x\n1\n")
    events = {name: submission("c1", task) for name, task in REFUSED_AT_SUBMIT.items()}
    async with services(settings, store, names=("runner",)):
        await start_campaign(bus)
        for event in events.values():
            await bus.publish(event)
        log = await wait_for_events(bus, answered(len(events)))
    by_submission = {a.submission: a for a in answers(log)}
    for name, event in events.items():
        rejected = by_submission[event.event_id]
        assert isinstance(rejected, TaskRejected), name
        assert rejected.reason == "invalid" and rejected.task_id == event.task.task_id, name
    assert not [e for e in log if isinstance(e, RunRequested)]


UNDECODABLE = {
    "not JSON": b"task: t1\nprompt: p\n",
    "not UTF-8": b'{"event_type": "TaskSubmitted", "task": {"task_id": "t1", "prompt": "\xff\xfe"}}',
    "truncated JSON": b'{"event_type": "TaskSubmitted", "event_id": "',
    "JSON of the wrong shape": b'[{"event_type": "TaskSubmitted"}]',
    "empty": b"",
}


async def test_every_undecodable_submission_is_answered_under_its_message_id(
    bus: Bus, settings: Settings
) -> None:
    """A body that cannot name itself still has the Nats-Msg-Id its publisher set."""
    subject = bus.subjects.event("TaskSubmitted", "c1", "-")
    ids = {name: f"outside-{i}" for i, name in enumerate(UNDECODABLE)}
    async with services(settings, LocalBlobStore(settings.blob_dir), names=("runner",)):
        for name, body in UNDECODABLE.items():
            await bus.js.publish(subject, body, headers={"Nats-Msg-Id": ids[name]})
        log = await wait_for_events(bus, answered(len(UNDECODABLE)))
    by_submission = {a.submission: a for a in answers(log)}
    for name, msg_id in ids.items():
        rejected = by_submission.get(msg_id)
        assert isinstance(rejected, TaskRejected), name
        assert rejected.reason == "invalid" and rejected.campaign_id == "c1", name
        assert rejected.causation_id == msg_id and rejected.detail, name


async def test_a_malformed_submission_is_answered_field_by_field(
    bus: Bus, settings: Settings
) -> None:
    """The answer names each wrong field in a sentence: no pydantic dump, no links."""
    event = submission("c1", Task(task_id="t1", prompt="p"))
    body = json.loads(event.model_dump_json())
    body["task"]["prompt"] = ["not", "text"]
    del body["task"]["task_id"]
    subject = bus.subjects.event("TaskSubmitted", "c1", "-")
    async with services(settings, LocalBlobStore(settings.blob_dir), names=("runner",)):
        await start_campaign(bus)
        await bus.js.publish(
            subject, json.dumps(body).encode(), headers={"Nats-Msg-Id": event.event_id}
        )
        log = await wait_for_events(bus, answered(1))
    (rejected,) = answers(log)
    assert isinstance(rejected, TaskRejected) and rejected.reason == "invalid"
    assert "task.prompt: Input should be a valid string" in rejected.detail
    assert "task.task_id: Field required" in rejected.detail
    assert "pydantic" not in rejected.detail and "tagged-union" not in rejected.detail


async def test_with_signatures_on_the_door_refuses_what_the_aggregator_would(
    bus: Bus, settings: Settings
) -> None:
    """Issue #24, finding 8 and its class: the runner scheduled an unsigned submission the
    aggregator then refused. Unsigned, signed with another role's key, by the publisher of
    another campaign, or altered after signing: rejected, nothing scheduled."""
    from assay.security.signing import ensure_operator, signer_for

    ensure_operator(settings)

    async def send(event: TaskSubmitted, signer: str | None, *, alter: bool = False) -> None:
        subject = bus.subjects.of(event)
        data = event.model_dump_json().encode()
        headers = {"Nats-Msg-Id": event.event_id}
        if signer is not None:
            key = signer_for(settings, signer)
            assert key is not None
            headers.update(key.headers(subject, data))
        if alter:
            data = data.replace(b'"prompt":"p"', b'"prompt":"q"')
        await bus.js.publish(subject, data, headers=headers)

    cases = {
        "unsigned": (None, False),
        "runner may not write TaskSubmitted": ("runner", False),
        "publisher of c2 wrote to campaign c1": ("publisher-c2", False),
        "bad signature": ("publisher-c1", True),
    }
    events = {
        why: submission("c1", Task(task_id=f"t{i}", prompt="p")) for i, why in enumerate(cases)
    }
    good = submission("c1", Task(task_id="good", prompt="p"))
    async with services(settings, LocalBlobStore(settings.blob_dir), names=("runner",)):
        await start_campaign(bus)
        for why, (signer, alter) in cases.items():
            await send(events[why], signer, alter=alter)
        await send(good, "publisher-c1")
        log = await wait_for_events(bus, answered(len(cases) + 1))
    by_submission = {a.submission: a for a in answers(log)}
    for why, event in events.items():
        rejected = by_submission[event.event_id]
        assert isinstance(rejected, TaskRejected) and rejected.reason == "invalid", why
        assert why in rejected.detail, (why, rejected.detail)
    assert isinstance(by_submission[good.event_id], TaskAccepted)
    assert {e.task_id for e in log if isinstance(e, RunRequested)} == {"good"}


async def _most_in_hand(bus: Bus, until: asyncio.Event) -> int:
    """The most submissions the runner's task consumer held unsettled at once, sampled."""
    from nats.js.errors import NotFoundError

    most = 0
    while not until.is_set():
        try:
            info = await bus.js.consumer_info(bus.stream.name, "runner-tasks")
        except NotFoundError:  # the runner has not made its durable yet
            await asyncio.sleep(0.001)
            continue
        most = max(most, info.num_ack_pending)
        await asyncio.sleep(0.002)  # an admission takes several round trips: none is missed
    return most


async def _admitted_at_once(bus: Bus, settings: Settings, tasks: int) -> int:
    spec = campaign("c1", [scripted_agent("a1", "m", "http://127.0.0.1:9")], epochs=1)
    await bus.publish(campaign_started(spec, producer=OUTSIDE))
    for i in range(tasks):
        await bus.publish(submission("c1", Task(task_id=f"t{i}", prompt="p")))
    done = asyncio.Event()
    async with services(settings, LocalBlobStore(settings.blob_dir), names=("runner",)):
        sampling = asyncio.create_task(_most_in_hand(bus, done))
        events = await wait_for_events(bus, answered(tasks), timeout=120)
        done.set()
        most = await sampling
    assert all(isinstance(a, TaskAccepted) for a in answers(events))
    return most


async def test_a_runner_admits_as_many_submissions_at_once_as_it_drives_runs(
    bus: Bus, settings: Settings
) -> None:
    """A runner driving 150 runs at once admits 150 submissions at once (64 at a time, a
    500-run first wave waited eight rounds of admissions on a busy event loop): with 200
    stored before it starts, more than 64 are in its hands at some moment, all answered."""
    from assay_runner.handlers import ADMISSIONS_IN_FLIGHT

    wide = settings.model_copy(update={"runner_concurrency": 150})
    most = await _admitted_at_once(bus, wide, 200)
    assert ADMISSIONS_IN_FLIGHT < most <= 150


async def test_a_runner_driving_few_runs_still_admits_the_least_number_at_once(
    bus: Bus, settings: Settings
) -> None:
    """A runner driving 8 runs admits up to `ADMISSIONS_IN_FLIGHT` (64) at once, no more."""
    from assay_runner.handlers import ADMISSIONS_IN_FLIGHT

    narrow = settings.model_copy(update={"runner_concurrency": 8})
    most = await _admitted_at_once(bus, narrow, 100)
    assert 8 < most <= ADMISSIONS_IN_FLIGHT
