"""Attacks on the log, each against a stack whose services run as their own NATS users.

A campaign runs to completion (agent, sandbox, an LLM judge, the rule judge, the
aggregator); then an attacker with one of the real users' rights tries to bend the log.
Afterwards every figure of the report must equal the undisturbed run's, the attack must
be counted as refused, and nothing that reads the log may break.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client

from assay.bus import Bus, Skipped
from assay.campaign import submit_campaign
from assay.security.signing import ensure_operator, signer_for, trust_for
from assay.store import LocalBlobStore
from assay.tasks import load_tasks
from assay_aggregator.audit import REFUSED, audit_run, load_run_events
from assay_aggregator.handlers import AggregatorService
from assay_aggregator.rebuild import fold_stream
from assay_aggregator.service import build as build_aggregator
from assay_judge.service import build_rules
from assay_report.projections import Projections
from assay_report.report import build_report
from assay_schemas import (
    JudgmentRecorded,
    Producer,
    RunRequested,
    Task,
    TaskRejected,
    TaskSubmitted,
    parse_event,
)
from assay_testing.pipeline import (
    campaign,
    scripted_agent,
    wait_for_events,
    write_task,
)
from assay_testing.scripted import ScriptedModelServer
from tests.judge.cases import judge_spec

from .conftest import CAMPAIGN, SecureNats
from .stack import connected, restricted_services, row_counter

pytestmark = pytest.mark.timeout(120)

POISON = b'{"x":' + b"[" * 1200 + b"]" * 1200 + b"}"


@dataclass
class Done:
    """A finished, undisturbed campaign and what the attacker needs to aim at it."""

    secure: SecureNats
    aggregator: AggregatorService
    cli: Bus
    figures: dict[str, Any]
    verdicts: list[tuple[str, bytes, dict[str, str]]]
    """(subject, bytes, headers) of every stored JudgmentRecorded."""

    async def figures_now(self) -> dict[str, Any]:
        """The live aggregator's report figures once it has folded the whole log."""
        head = (await self.cli.js.stream_info(self.secure.base.stream)).state.last_seq
        await self.aggregator.wait_for(head, timeout=20)
        return figures(self.aggregator.projections)

    def refused(self) -> list[int]:
        return sorted(self.aggregator.state.refused)

    def subject(self, event_type: str, run: str, campaign_id: str = CAMPAIGN) -> str:
        return f"{self.secure.base.subject_prefix}.ev.{event_type}.{campaign_id}.{run}"


def figures(p: Projections) -> dict[str, Any]:
    """Every figure of the report; what only says where the log stands is left out."""
    doc = json.loads(build_report(p, n_resamples=200).model_dump_json())
    for key in ("log_sequence", "refused"):
        doc.pop(key)
    return dict(doc)


@pytest.fixture
def scripted() -> Iterator[ScriptedModelServer]:
    with row_counter("mkdir -p out && wc -l data.csv > out/n.txt", 6) as server:
        yield server


@pytest.fixture
async def done(
    secure: SecureNats, admin_bus: Bus, tmp_path: Path, scripted: ScriptedModelServer
) -> AsyncIterator[Done]:
    """The campaign, run to the end with signing on, every service as its own user."""
    ensure_operator(secure.base)
    store = LocalBlobStore(secure.base.blob_dir)
    folder = write_task(tmp_path / "tasks", "rows", "count rows", {"data.csv": "a\n1\n2\n"})
    judge = judge_spec("j1", "judge", scripted.openai_base_url)
    spec = campaign(
        CAMPAIGN, [scripted_agent("agent", "agent", scripted.openai_base_url)], judges=[judge]
    )
    cli = await connected(secure.settings("cli"), "cli")
    rules = build_rules(secure.settings("judge"), store=store)
    aggregator = build_aggregator(secure.settings("aggregator"), write_report=False)
    try:
        async with restricted_services(secure.settings, store, judges=[judge]):
            await rules.start()
            await aggregator.start()
            await submit_campaign(cli, store, spec, load_tasks(folder, max_bytes=10_000))
            await wait_for_events(
                cli,
                lambda evs: (
                    {(e.judge_id) for e in evs if isinstance(e, JudgmentRecorded)}
                    == {"j1", "rules"}
                ),
                timeout=60,
            )
            run = Done(secure, aggregator, cli, {}, [])
            run.figures = await run.figures_now()
            assert run.refused() == []
            assert run.aggregator.state.trust_root  # signatures were checked
            run.verdicts = await _stored(cli, run.subject("JudgmentRecorded", "*"))
            yield run
    finally:
        await aggregator.stop()
        await rules.stop()
        await cli.stop()


async def _stored(bus: Bus, subject: str) -> list[tuple[str, bytes, dict[str, str]]]:
    from assay.bus import read_raw

    return [
        (raw.subject, raw.data, raw.headers)
        async for raw in read_raw(bus.js, bus.stream.name, subject=subject)
    ]


async def _nats(secure: SecureNats, user: str) -> Client:
    import nats

    from assay.security.permissions import inbox_prefix

    return await nats.connect(
        secure.base.nats_url,
        user=user,
        password=secure.passwords[user],
        allow_reconnect=False,
        inbox_prefix=inbox_prefix(user),
    )


async def _publish(nc: Client, subject: str, data: bytes, headers: dict[str, str]) -> None:
    ack = await nc.jetstream().publish(subject, data, headers=headers or None, timeout=5)
    assert ack.seq > 0


async def _second_verdict(done: Done, subject: str, data: bytes, event_id: str) -> dict[str, Any]:
    """Judge j1's verdict `data` again under a new event id, every score 10, signed with
    j1's own key and published as the judge; returns what was published."""
    body = json.loads(data)
    body["event_id"] = event_id
    for dimension in body["scores"].values():
        dimension["score"] = 10
    second = json.dumps(body).encode()
    signer = signer_for(done.secure.base, "judge-j1")
    assert signer is not None
    nc = await _nats(done.secure, "judge")
    try:
        await _publish(nc, subject, second, signer.headers(subject, second))
    finally:
        await nc.close()
    return dict(body)


def _rules_verdict(done: Done) -> tuple[str, bytes, dict[str, str]]:
    return next(v for v in done.verdicts if parse_event(v[1]).judge_id == "rules")  # type: ignore[attr-defined]


def _without_tags(data: bytes, event_id: str) -> bytes:
    body = json.loads(data)
    body.update(event_id=event_id, failure_tags=[], checks=[])
    return json.dumps(body).encode()


async def test_one_nested_message_breaks_no_reader(done: Done) -> None:
    publisher = await _nats(done.secure, f"publisher-{CAMPAIGN}")
    try:
        await _publish(publisher, done.subject("TaskSubmitted", "-"), POISON, {})
    finally:
        await publisher.close()
    assert await done.figures_now() == done.figures
    [poison] = done.refused()
    # `assay events`: the replay skips it and says where.
    skipped: list[Skipped] = []
    events = [e async for e in done.cli.replay(skipped=skipped)]
    assert events and [s.sequence for s in skipped] == [poison]
    # `assay report` / `assay replay --verify`: a fresh fold, as the cli user.
    fresh = await fold_stream(
        done.cli.js,
        done.cli.stream.name,
        done.cli.subjects.events,
        trust=trust_for(done.secure.base),
    )
    assert sorted(fresh.refused) == [poison]
    assert figures(Projections(fresh)) == done.figures
    # A fresh aggregator starts on such a log.
    again = build_aggregator(done.secure.settings("aggregator"), write_report=False)
    await again.start()
    try:
        assert figures(again.projections) == done.figures
    finally:
        await again.stop()
    # The runner's live durable dead-lettered it instead of holding it forever.
    letters = await done.cli.dead_letters("runner-tasks")
    assert [body for body, _ in letters] == [POISON]


async def test_messages_dressed_as_nats_statuses_break_no_reader(done: Done) -> None:
    """Empty bodies with the headers of a heartbeat and of a pull's 404: nats-py took such
    stored messages for its own control messages (see `assay.bus._stored`)."""
    dressed = [{"Status": "100", "Description": "Idle Heartbeat"}, {"Status": "404"}]
    publisher = await _nats(done.secure, f"publisher-{CAMPAIGN}")
    try:
        for headers in dressed:
            await _publish(publisher, done.subject("TaskSubmitted", "-"), b"", headers)
    finally:
        await publisher.close()
    assert await done.figures_now() == done.figures
    stored = done.refused()
    assert len(stored) == len(dressed)
    skipped: list[Skipped] = []
    assert [e async for e in done.cli.replay(skipped=skipped)]
    assert [s.sequence for s in skipped] == stored
    fresh = await fold_stream(
        done.cli.js,
        done.cli.stream.name,
        done.cli.subjects.events,
        trust=trust_for(done.secure.base),
    )
    assert sorted(fresh.refused) == stored
    assert figures(Projections(fresh)) == done.figures
    for _ in range(100):  # the runner's durable dead-letters them rather than drop them
        letters = await done.cli.dead_letters("runner-tasks")
        if len(letters) == len(dressed):
            break
        await asyncio.sleep(0.1)
    assert [body for body, _ in letters] == [b"", b""]


@pytest.mark.parametrize(
    ("user", "service", "subjects"),
    [
        ("runner", "runner", ["RunRequested", "AgentStepLogged", "AgentFinished", "RunFailed"]),
        ("sandbox-manager", "sandbox-manager", ["SandboxReady", "ArtifactsSealed", "RunFailed"]),
        (f"publisher-{CAMPAIGN}", "cli", ["TaskSubmitted"]),
    ],
)
async def test_forged_verdicts_through_every_permitted_subject_count_for_nothing(
    done: Done, user: str, service: str, subjects: list[str]
) -> None:
    """A rule verdict without tags or checks, aimed at the real run, on each subject the
    user may publish to, signed with that service's own enrolled key."""
    subject, data, _ = _rules_verdict(done)
    run = subject.rsplit(".", 1)[-1]
    signer = signer_for(done.secure.base, service)
    assert signer is not None
    nc = await _nats(done.secure, user)
    try:
        for i, event_type in enumerate(subjects):
            target = done.subject(event_type, "-" if event_type == "TaskSubmitted" else run)
            forged = _without_tags(data, f"forged-{service}-{i}")
            await _publish(nc, target, forged, signer.headers(target, forged))
    finally:
        await nc.close()
    assert await done.figures_now() == done.figures
    assert len(done.refused()) == len(subjects)


async def test_a_verdict_replayed_with_altered_scores_counts_for_nothing(done: Done) -> None:
    """As the judge user: the real j1 verdict again with other scores and a new id, with its
    original signature, with another judge's key, and unsigned."""
    subject, data, headers = next(
        v
        for v in done.verdicts
        if parse_event(v[1]).judge_id == "j1"  # type: ignore[attr-defined]
    )
    body = json.loads(data)
    for dimension in body["scores"].values():
        dimension["score"] = 10
    other = signer_for(done.secure.base, "judge-j2")
    assert other is not None
    nc = await _nats(done.secure, "judge")
    try:
        for i, sign in enumerate(("original", "other-judge", "unsigned")):
            body["event_id"] = f"altered-{i}"
            altered = json.dumps(body).encode()
            signed = {
                "original": headers,
                "other-judge": other.headers(subject, altered),
                "unsigned": {},
            }[sign]
            await _publish(
                nc, subject, altered, {k: v for k, v in signed.items() if k != "Nats-Msg-Id"}
            )
    finally:
        await nc.close()
    assert await done.figures_now() == done.figures
    reasons = [done.aggregator.state.refused[s].reason for s in done.refused()]
    assert len(reasons) == 3, reasons
    assert "bad signature" in reasons[0]
    assert "wrote a verdict as judge j1" in reasons[1]
    assert "unsigned" in reasons[2]
    # Readers of history check signatures by chain: the copy of the genuine verdict's chain
    # link (and signature) is refused there too, with the same reasons, and so is it in
    # `assay audit`.
    live = {seq: done.aggregator.state.refused[seq].reason for seq in done.refused()}
    trust = trust_for(done.secure.base)
    fresh = await fold_stream(
        done.cli.js, done.cli.stream.name, done.cli.subjects.events, trust=trust
    )
    assert {seq: r.reason for seq, r in fresh.refused.items()} == live
    assert figures(Projections(fresh)) == done.figures
    _, signers = await load_run_events(done.cli, subject.rsplit(".", 1)[-1], trust)
    assert sorted(seq for seq, who in signers.items() if who.startswith(REFUSED)) == sorted(live)


async def test_a_second_verdict_for_a_sample_is_refused(done: Done) -> None:
    """Even signed by the judge's own key: the first verdict stands."""
    subject, data, _ = next(
        v
        for v in done.verdicts
        if parse_event(v[1]).judge_id == "j1"  # type: ignore[attr-defined]
    )
    await _second_verdict(done, subject, data, "second-verdict")
    assert await done.figures_now() == done.figures
    [refused] = done.refused()
    assert "second verdict" in done.aggregator.state.refused[refused].reason


async def test_signing_keys_reach_no_event_blob_or_log(done: Done) -> None:
    """Public keys and enrollments travel in headers; no seed is ever stored or logged."""
    keys = done.secure.base.home / "keys"
    seeds = [p.read_bytes().strip() for p in keys.glob("*.seed")]
    assert len(seeds) >= 5  # operator, cli, runner, sandbox-manager, judge-j1, judge-rules
    stored = [done.secure.server.data_dir, done.secure.base.blob_dir, done.secure.server.log_path]
    for root in stored:
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for path in files:
            data = path.read_bytes()
            assert not any(seed in data for seed in seeds), f"a signing seed is in {path}"


async def test_a_second_verdict_scores_nothing_in_the_audit_either(done: Done) -> None:
    """Issue #24, finding 9: `assay audit` showed the refused second verdict (signed by the
    judge's own key) as the run's score, "mean 10.00 → PASS", while the report kept the
    first. Both now take the fold's counting rule."""
    subject, data, _ = next(
        v
        for v in done.verdicts
        if parse_event(v[1]).judge_id == "j1"  # type: ignore[attr-defined]
    )
    run = subject.rsplit(".", 1)[-1]
    trust = trust_for(done.secure.base)
    store = LocalBlobStore(done.secure.base.blob_dir)
    logged, signers = await load_run_events(done.cli, run, trust)
    before = audit_run(logged, store, signers=signers).contribution
    assert before.scored and before.run_score < 10
    body = await _second_verdict(done, subject, data, "second-verdict-audited")
    assert await done.figures_now() == done.figures
    logged, signers = await load_run_events(done.cli, run, trust)
    audit = audit_run(logged, store, signers=signers)
    assert audit.contribution == before
    assert signers[logged[-1].sequence].startswith(REFUSED + "JudgmentRecorded: second verdict")
    assert [v.scores for v in audit.verdicts if v.judge_id == "j1"] != [
        {k: 10 for k in body["scores"]}
    ]


async def test_an_unsigned_outside_task_is_rejected_and_runs_nowhere(done: Done) -> None:
    """Issue #24, finding 8: an outside publisher's unsigned TaskSubmitted was listed as
    refused, yet the runner ran it and its task reached the leaderboard's task count and
    the per-task check tables. Now the runner's door refuses it as the fold does."""
    task = Task(task_id="outside", prompt="count the rows of nothing")
    event = TaskSubmitted(
        event_id=TaskSubmitted.id_for("outside"),
        campaign_id=CAMPAIGN,
        task_id=task.task_id,
        task=task,
        producer=Producer(service="outside", version="1"),
    )
    subject = done.subject("TaskSubmitted", "-")
    publisher = await _nats(done.secure, f"publisher-{CAMPAIGN}")
    try:
        await _publish(publisher, subject, event.model_dump_json().encode(), {})
    finally:
        await publisher.close()
    answers = await wait_for_events(
        done.cli,
        lambda evs: any(
            isinstance(e, TaskRejected) and e.submission == event.event_id for e in evs
        ),
        timeout=30,
    )
    [rejected] = [e for e in answers if isinstance(e, TaskRejected)]
    assert rejected.reason == "invalid" and "unsigned" in rejected.detail
    assert not [e for e in answers if isinstance(e, RunRequested) and e.task_id == "outside"]
    assert await done.figures_now() == done.figures
    [refused] = done.refused()
    assert "unsigned" in done.aggregator.state.refused[refused].reason


async def _dead_letter_reasons(bus: Bus, durable: str, count: int) -> list[str]:
    """The reasons of the first `count` dead letters of `durable` (waits for them)."""
    from assay.bus import DEAD_REASON

    for _ in range(150):
        letters = await bus.dead_letters(durable)
        if len(letters) >= count:
            break
        await asyncio.sleep(0.1)
    return [headers[DEAD_REASON] for _, headers in letters]


def _moved_to(data: bytes, event_id: str, run_id: str) -> bytes:
    body = json.loads(data)
    body.update(event_id=event_id, run_id=run_id)
    return json.dumps(body).encode()


async def test_forged_requests_and_seals_reach_no_service_handler(done: Done) -> None:
    """Issue #49: the sandbox-manager and the judges acted on events they never checked.
    A copy of the real run's request, unsigned, straight onto its subject with the cli's
    NATS rights, and a copy of its seal signed by a key that may not write seals (the
    cli's) with the sandbox-manager's rights: the bus refuses both on every consumer
    before a handler sees them, so no sandbox is made and no judge judges."""
    [(request_subject, request, _)] = await _stored(done.cli, done.subject("RunRequested", "*"))
    [(_, seal, _)] = await _stored(done.cli, done.subject("ArtifactsSealed", "*"))
    run = "forged-run"
    forged_request = _moved_to(request, "forged-request", run)
    forged_seal = _moved_to(seal, "forged-seal", run)
    cli_key = signer_for(done.secure.base, "cli")
    assert cli_key is not None and request_subject.endswith(parse_event(request).run_id or "")
    cli, sandbox_manager = (
        await _nats(done.secure, "cli"),
        await _nats(done.secure, "sandbox-manager"),
    )
    try:
        await _publish(cli, done.subject("RunRequested", run), forged_request, {})
        target = done.subject("ArtifactsSealed", run)
        await _publish(sandbox_manager, target, forged_seal, cli_key.headers(target, forged_seal))
    finally:
        await cli.close()
        await sandbox_manager.close()
    [refused_request] = await _dead_letter_reasons(done.cli, "sandbox-manager-runs", 1)
    assert refused_request.startswith("SignatureRefused: RunRequested: unsigned")
    for judge in ("judge-j1", "judge-rules"):
        [refused_seal] = await _dead_letter_reasons(done.cli, judge, 1)
        assert refused_seal.startswith("SignatureRefused: ArtifactsSealed: cli/cli may not write")
    assert await done.figures_now() == done.figures
    assert len(done.refused()) == 2
    caused = [e async for e in done.cli.replay() if e.event.run_id == run]
    assert [e.event.event_id for e in caused] == ["forged-request", "forged-seal"]
