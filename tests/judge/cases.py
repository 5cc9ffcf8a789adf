"""Helpers of the jury tests: sealed runs published straight to the log, judge scripts, and
`Judging`, the campaign → judges → seal → wait steps most judge tests repeat."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

from assay.bus import Bus
from assay.config import Settings
from assay.providers import ModelProvider, RetryPolicy, make_provider
from assay.store import BlobStore, LocalBlobStore, media_type_of
from assay_judge import JudgeService, RulesService, build, build_rules
from assay_schemas import (
    AgentSpec,
    AgentStepLogged,
    ArtifactsSealed,
    CampaignSpec,
    Event,
    FileRef,
    JudgeSpec,
    JudgmentFailed,
    JudgmentRecorded,
    Limits,
    Price,
    ReferenceCheck,
    RunRequested,
    SandboxSpec,
    Task,
    TaskJudgeConfig,
    ToolCallRecord,
    default_rubric,
)
from assay_testing.events import campaign_started
from assay_testing.scripted import Script, ScriptedModelServer, ScriptedSequence, ScriptReply

SCRIPTED_KEY = "ASSAY_TEST_SCRIPTED_KEY"
AGENT = AgentSpec(agent_id="agent-a", model="agent-model")
RUBRIC = default_rubric()
TEST = "tests"
OUT_CSV = {"out.csv": b"a\n1\n"}

Predicate = Callable[[list[Event]], bool]


def judge_spec(judge_id: str, model: str, base_url: str, **extra: Any) -> JudgeSpec:
    """A judge served by the scripted server through the real OpenAI SDK."""
    return JudgeSpec(
        judge_id=judge_id, model=model, base_url=base_url, api_key_env=SCRIPTED_KEY, **extra
    )


def fast_provider(spec: JudgeSpec) -> ModelProvider:
    """Like the default provider, with quick deterministic retries."""
    return make_provider(
        spec.provider,
        spec.model,
        base_url=spec.base_url,
        api_key_env=spec.api_key_env or SCRIPTED_KEY,
        timeout_s=spec.timeout_s,
        max_concurrency=spec.max_concurrency,
        retry=RetryPolicy.for_tests(),
    )


def put(store: BlobStore, path: str, data: bytes) -> FileRef:
    """Store bytes and describe them as a workspace file."""
    info = store.put_bytes(data)
    return FileRef(path=path, sha256=info.sha256, size=info.size, media_type=media_type_of(path))


async def start_campaign(
    bus: Bus,
    campaign_id: str,
    judges: Sequence[JudgeSpec] = (),
    prices: dict[str, Price] | None = None,
) -> CampaignSpec:
    """Publish CampaignStarted listing `judges` (and pricing models with `prices`)."""
    spec = CampaignSpec(
        campaign_id=campaign_id, agents=[AGENT], judges=list(judges), prices=prices or {}
    )
    await bus.publish(campaign_started(spec, producer=bus.producer))
    return spec


async def seal_run(
    bus: Bus,
    store: BlobStore,
    *,
    campaign_id: str,
    run_id: str,
    files: dict[str, bytes],
    final_message: str,
    attachments: dict[str, bytes] | None = None,
    checks: Sequence[ReferenceCheck] = (),
    rule_weights: dict[str, float] | None = None,
    sampling_times: int = 1,
    steps: Sequence[list[tuple[str, dict[str, Any]]]] = (),
    outcome: str = "finished",
    task: Task | None = None,
    final_message_blob: FileRef | None = None,
) -> ArtifactsSealed:
    """Publish a run as the runner and sandbox-manager would: request, steps, seal.

    Attachments are sealed too (they stay in the workspace); `steps` lists each step's
    tool calls as (name, arguments). A given `task` (attachments already stored) replaces
    the built one.
    """
    attached = [put(store, p, d) for p, d in (attachments or {}).items()]
    if task is not None:
        attached = list(task.attachments)
    task = task or Task(
        task_id=f"task-{run_id}",
        prompt="Compare growth of the strains in growth.csv and report the effect size.",
        attachments=attached,
        reference_checks=list(checks),
        judge=TaskJudgeConfig(rule_weights=rule_weights or {}, sampling_times=sampling_times),
    )
    common = {
        "campaign_id": campaign_id,
        "run_id": run_id,
        "task_id": task.task_id,
        "producer": bus.producer,
    }
    await bus.publish(
        RunRequested(
            event_id=RunRequested.id_for(run_id),
            task=task,
            agent=AGENT,
            epoch=0,
            limits=Limits(),
            sandbox=SandboxSpec(),
            **common,
        )
    )
    for i, calls in enumerate(steps):
        records = [
            ToolCallRecord(call_id=f"c{i}-{j}", name=n, arguments=json.dumps(a))
            for j, (n, a) in enumerate(calls)
        ]
        await bus.publish(
            AgentStepLogged(
                event_id=AgentStepLogged.id_for(run_id, i), step=i, tool_calls=records, **common
            )
        )
    sealed = ArtifactsSealed(
        event_id=ArtifactsSealed.id_for(run_id),
        files=[*attached, *(put(store, p, d) for p, d in files.items())],
        final_message=final_message,
        final_message_truncated=final_message_blob is not None,
        final_message_blob=final_message_blob,
        agent_id=AGENT.agent_id,
        epoch=0,
        outcome=outcome,
        **common,
    )
    await bus.publish(sealed)
    return sealed


def verdict(
    score: int = 8, *, tags: Sequence[str] = (), files: Sequence[str] = (), **override: Any
) -> dict[str, Any]:
    """Valid `submit_verdict` arguments for the default rubric."""
    args: dict[str, Any] = {
        "scores": {k: {"score": score, "reason": f"{k} looks fine"} for k in RUBRIC.dimension_keys},
        "failure_tags": list(tags),
        "rationale": "Checked the outputs against the claims.",
        "files_relied_on": list(files),
    }
    args.update(override)
    return args


def reading_judge(
    reads: Sequence[tuple[str, dict[str, Any]]], final: dict[str, Any]
) -> ScriptedSequence:
    """A judge that calls each read tool in turn, then submits `final`."""
    return ScriptedSequence(
        [*(ScriptReply.call(n, a) for n, a in reads), ScriptReply.call("submit_verdict", final)]
    )


def of_type(events: Sequence[Event], cls: type[Any], **where: Any) -> list[Any]:
    """Events of one type whose fields equal `where`."""
    return [
        e
        for e in events
        if isinstance(e, cls) and all(getattr(e, k) == v for k, v in where.items())
    ]


def judgments(events: Sequence[Event], judge_id: str | None = None) -> list[JudgmentRecorded]:
    """Recorded judgments, optionally of one judge."""
    return [e for e in events if isinstance(e, JudgmentRecorded) and judge_id in (None, e.judge_id)]


def outcomes(events: Sequence[Event]) -> list[JudgmentRecorded | JudgmentFailed]:
    """Judgments recorded or failed."""
    return [e for e in events if isinstance(e, JudgmentRecorded | JudgmentFailed)]


async def wait_log(
    bus: Bus, predicate: Callable[[list[Event]], bool], *, timeout: float = 30.0
) -> list[Event]:
    """Poll the log until `predicate` holds; fail with what the log holds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        events = [e.event async for e in bus.replay()]
        if predicate(events):
            return events
        if asyncio.get_running_loop().time() > deadline:
            kinds = [e.event_type for e in events]
            raise AssertionError(f"log did not reach the expected state in {timeout}s: {kinds}")
        await asyncio.sleep(0.1)


@asynccontextmanager
async def running(*services: JudgeService | RulesService) -> AsyncIterator[None]:
    """Start judge services (JudgeRegistered, then consume); stop them on exit."""
    started: list[JudgeService | RulesService] = []
    try:
        for service in services:
            await service.start()
            started.append(service)
        yield
    finally:
        for service in reversed(started):
            await service.stop()


def any_judgment(events: list[Event]) -> bool:
    """The log holds a recorded judgment."""
    return bool(judgments(events))


class Judged(NamedTuple):
    """What `Judging.one_run` left: the log when its wait ended, and the sealed run."""

    events: list[Event]
    sealed: ArtifactsSealed


@dataclass
class Judging:
    """One judge test's parts and the steps most judge tests repeat: a campaign naming its
    jury, the judges running, a run sealed, the log awaited."""

    bus: Bus
    settings: Settings
    store: LocalBlobStore
    server: ScriptedModelServer
    names: Iterator[str]

    async def campaign(
        self,
        jury: Sequence[JudgeSpec],
        campaign_id: str = "c1",
        *,
        prices: dict[str, Price] | None = None,
    ) -> CampaignSpec:
        """Publish CampaignStarted naming `jury`."""
        return await start_campaign(self.bus, campaign_id, jury, prices=prices)

    def running(self, *services: JudgeService | RulesService) -> AbstractAsyncContextManager[None]:
        """Run `services` for the body of a `with` block."""
        return running(*services)

    def scripted(self, script: Script) -> str:
        """A fresh model name that answers with `script`."""
        model = next(self.names)
        self.server.add_script(model, script)
        return model

    def spec(self, judge_id: str, model: str, **extra: Any) -> JudgeSpec:
        """A judge on `model` of the scripted server."""
        return judge_spec(judge_id, model, self.server.openai_base_url, **extra)

    def llm(self, spec: JudgeSpec, **extra: Any) -> JudgeService:
        """The LLM judge of `spec`, with quick deterministic retries."""
        return build(self.settings, spec, store=self.store, providers=fast_provider, **extra)

    def rules(self) -> RulesService:
        """The rule judge on this test's store."""
        return build_rules(self.settings, store=self.store)

    async def seal(
        self,
        run_id: str = "r1",
        *,
        campaign_id: str = "c1",
        files: dict[str, bytes] | None = None,
        final_message: str = "done",
        **extra: Any,
    ) -> ArtifactsSealed:
        """Seal one run (by default r1 of c1, with out.csv and the answer "done")."""
        return await seal_run(
            self.bus,
            self.store,
            campaign_id=campaign_id,
            run_id=run_id,
            files=OUT_CSV if files is None else files,
            final_message=final_message,
            **extra,
        )

    async def wait(self, predicate: Predicate, *, timeout: float = 30.0) -> list[Event]:
        """Poll the log until `predicate` holds."""
        return await wait_log(self.bus, predicate, timeout=timeout)

    async def one_run(
        self,
        jury: Sequence[JudgeSpec],
        until: Predicate = any_judgment,
        *,
        prices: dict[str, Price] | None = None,
        with_rules: bool = False,
        **seal: Any,
    ) -> Judged:
        """Campaign c1 names `jury`; its judges (and the rule judge, `with_rules`) run while
        one run is sealed (`seal` as for `seal`), until the log satisfies `until`."""
        await self.campaign(jury, prices=prices)
        # Built after the campaign started, as the jury builds them.
        judges = [self.llm(spec) for spec in jury]
        async with self.running(*judges, *([self.rules()] if with_rules else [])):
            sealed = await self.seal(**seal)
            events = await self.wait(until)
        return Judged(events, sealed)
