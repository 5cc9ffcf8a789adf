"""One agent run: model turn → tools → AgentStepLogged, until a stop condition."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from opentelemetry import trace

from assay.bus import Bus, publish_through_outages
from assay.providers import (
    GenerationParams,
    Message,
    ModelProvider,
    PriceTable,
    cost,
    prompt_cache_key,
)
from assay.store import BlobStore
from assay.telemetry import meter, tracer
from assay_schemas import (
    FINAL_MESSAGE_INLINE_CHARS,
    MAX_EVENT_BYTES,
    AgentFinished,
    AgentStepLogged,
    FileRef,
    InvalidInput,
    Limits,
    RunFault,
    RunRequested,
    SandboxReady,
    StopReason,
    StoreError,
    ToolCallRecord,
    Usage,
    same_run,
)

from .conversation import rebuild, step_messages
from .tools import TOOLS, ToolBox

__all__ = [
    "AgentRun",
    "AnswerNotStored",
    "Spend",
    "StepTooLarge",
    "limit_reached",
    "publish_finished",
]

TOKENS = meter("assay.runner").create_counter(
    "assay.tokens", unit="{token}", description="Model tokens used by agents"
)
COST = meter("assay.runner").create_counter(
    "assay.cost", unit="USD", description="Model cost of agent steps"
)


class AnswerNotStored(StoreError, RunFault):
    """A final answer too long to inline could not be stored as a blob: the store's
    failure, not the agent's."""


class StepTooLarge(InvalidInput, RunFault):
    """A model turn does not fit in one event: the run cannot be logged as it happened.
    The agent's own output, so scored as its failure."""

    fault = "agent"


@dataclass(kw_only=True)
class AgentRun:
    """Drives one run to its end, resuming after the steps already logged."""

    bus: Bus
    request: RunRequested
    ready: SandboxReady
    provider: ModelProvider
    tools: ToolBox
    prices: PriceTable
    store: BlobStore
    """Where an answer too long to inline goes."""
    sealed_choice: str | None = None
    """What the run's first step carries sealed: the plan a control plays, or none (see
    `AgentStepLogged.sealed_choice`)."""

    def _params(self) -> GenerationParams:
        request = self.request
        p = request.agent.params
        return GenerationParams(
            max_tokens=int(p.get("max_tokens", 4096)),
            temperature=float(p["temperature"]) if "temperature" in p else None,
            seed=int(p["seed"]) if "seed" in p else None,
            # Every epoch of this agent on this task shares its prompt's opening.
            cache_key=prompt_cache_key(
                request.campaign_id, request.agent.agent_id, request.task.task_id
            ),
        )

    async def run(self, steps: list[AgentStepLogged]) -> AgentFinished:
        """Continue from `steps` (possibly empty) and publish the rest of the run."""
        messages = rebuild(self.request, steps)
        submitted = _submitted(steps)
        stop: StopReason | None = "submitted" if submitted is not None else None
        final = submitted or ""
        # A step's publish runs while the next model call is in flight; _step awaits it
        # before any tool runs, and so before the next step is published.
        logging: asyncio.Task[None] | None = None
        spend = Spend.of(steps)
        limits, since = self.request.limits, began(self.ready, steps)
        try:
            while stop is None and (stop := limit_reached(limits, spend, since)) is None:
                step, answer = await self._step(len(steps), messages, logging)
                logging = asyncio.create_task(self._log(step))
                steps.append(step)
                spend.add(step)
                messages.extend(step_messages(step))
                if answer is not None:
                    stop, final = "submitted", answer
                elif not step.tool_calls:
                    stop, final = "model_stopped", step.model_output
        finally:
            if logging is not None:
                await logging  # a failed publish fails the run, whatever else failed
        if not final and steps:
            final = steps[-1].model_output
        return await self._finish(stop, final, steps, since)

    async def _step(
        self, index: int, messages: list[Message], previous: asyncio.Task[None] | None
    ) -> tuple[AgentStepLogged, str | None]:
        """One model turn and its tools; `previous` (the last step's publish) is awaited
        between them, so nothing runs in the sandbox before every earlier step is logged."""
        agent = self.request.agent
        started = time.perf_counter()
        # The provider traces the call as a GenAI span (model, tokens, finish reason).
        completion = await self.provider.complete(tuple(messages), TOOLS, self._params())
        if previous is not None:
            await previous
        results = []
        answer: str | None = None
        for call in completion.tool_calls:
            with tracer("assay.runner").start_as_current_span(f"execute_tool {call.name}") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", call.name)
                outcome = await self.tools.run(call)
                if outcome.record.is_error:
                    span.set_status(
                        trace.Status(trace.StatusCode.ERROR, outcome.record.output[:200])
                    )
            results.append(outcome.record)
            if outcome.submitted is not None and answer is None:
                answer = outcome.submitted
        usage = completion.usage
        step = AgentStepLogged(
            event_id=AgentStepLogged.id_for(self.request.run_id, index),
            **same_run(self.request, cause=self.ready),
            step=index,
            model_output=completion.text or "",
            tool_calls=[
                ToolCallRecord(call_id=c.id, name=c.name, arguments=c.arguments)
                for c in completion.tool_calls
            ],
            tool_results=results,
            usage=usage,
            latency_ms=(time.perf_counter() - started) * 1000,
            cost_usd=cost(completion.usage, agent.model, self.prices),
            cached_answer=completion.cached_answer,
            sealed_choice=self.sealed_choice if index == 0 else None,
            producer=self.bus.producer,
        )
        return step, answer

    async def _log(self, step: AgentStepLogged) -> None:
        """Append the step to the log, then count its tokens and cost."""
        # Made just before the next model call starts, this task first runs when that call
        # first waits, with its request still queued in the HTTP client's own task: one
        # turn of the loop lets the request go out before this serialises and signs. The
        # model calls of alternate runs with and without the turn: 0.22 ms shorter with it
        # (median of 9 campaigns, shorter in each; docs/scale.md).
        await asyncio.sleep(0)
        # Measured here so that the run fails saying why, not as an unanswered publish
        # redelivered until it looks like a runner crash.
        data = step.model_dump_json().encode()
        size = len(data)
        if size > MAX_EVENT_BYTES:
            raise StepTooLarge(
                f"model turn {step.step} is {size} bytes as an event, over the "
                f"{MAX_EVENT_BYTES} byte limit ({len(step.model_output)} characters of text)"
            )
        # Its tools have run: a failed publish is tried again, not the step.
        await publish_through_outages(self.bus, step, encoded=data)
        agent = self.request.agent
        labels = {"gen_ai.request.model": agent.model, "assay.agent_id": agent.agent_id}
        TOKENS.add(step.usage.input_tokens, {**labels, "gen_ai.token.type": "input"})
        TOKENS.add(step.usage.output_tokens, {**labels, "gen_ai.token.type": "output"})
        COST.add(step.cost_usd, labels)

    async def _finish(
        self,
        stop: StopReason,
        final: str,
        steps: Sequence[AgentStepLogged],
        since: datetime,
    ) -> AgentFinished:
        return await publish_finished(
            self.bus,
            self.store,
            self.request,
            self.ready,
            stop,
            final,
            steps,
            began_at=since,
        )


@dataclass
class Spend:
    """What a run's steps have used so far, kept as running totals so that checking the
    limits before each model call does not re-add every earlier step."""

    steps: int = 0
    tokens: int = 0
    cost_usd: float = 0.0

    @classmethod
    def of(cls, steps: Sequence[AgentStepLogged]) -> Spend:
        """The totals of steps already logged (a resumed run's)."""
        return cls(
            steps=len(steps),
            tokens=sum(s.usage.input_tokens + s.usage.output_tokens for s in steps),
            cost_usd=sum((s.cost_usd for s in steps), 0.0),
        )

    def add(self, step: AgentStepLogged) -> None:
        """Count one more step."""
        self.steps += 1
        self.tokens += step.usage.input_tokens + step.usage.output_tokens
        self.cost_usd += step.cost_usd


def limit_reached(limits: Limits, spend: Spend, since: datetime) -> StopReason | None:
    """The first of the run's limits that `spend` (of steps logged since `since`) reached."""
    elapsed = (datetime.now(UTC) - since).total_seconds()
    if spend.steps >= limits.max_steps:
        return "max_steps"
    if spend.tokens >= limits.max_tokens:
        return "max_tokens"
    if spend.cost_usd >= limits.cost_budget_usd > 0:
        return "cost_budget"
    if elapsed >= limits.wall_clock_s:
        return "wall_clock"
    return None


async def publish_finished(
    bus: Bus,
    store: BlobStore,
    request: RunRequested,
    ready: SandboxReady,
    stop: StopReason,
    final: str,
    steps: Sequence[AgentStepLogged],
    output_sha256: str | None = None,
    *,
    began_at: datetime,
) -> AgentFinished:
    """Publish the run's AgentFinished, totals summed over its steps, its duration since
    `began_at` (see `began`); a final message over FINAL_MESSAGE_INLINE_CHARS is inlined
    as its start and stored whole as a blob."""
    blob = await _store_answer(store, final) if len(final) > FINAL_MESSAGE_INLINE_CHARS else None
    finished = AgentFinished(
        event_id=AgentFinished.id_for(request.run_id),
        **same_run(request, cause=ready),
        stop_reason=stop,
        final_message=final[:FINAL_MESSAGE_INLINE_CHARS],
        final_message_truncated=blob is not None,
        final_message_blob=blob,
        steps=len(steps),
        usage=sum((s.usage for s in steps), Usage()),
        cost_usd=sum(s.cost_usd for s in steps),
        duration_s=(datetime.now(UTC) - began_at).total_seconds(),
        output_sha256=output_sha256,
        producer=bus.producer,
    )
    await bus.publish(finished)
    return finished


def began(ready: SandboxReady, steps: Sequence[AgentStepLogged]) -> datetime:
    """When the run's work began: its first model call (its first step's time less its
    latency), or now for a run with no step yet; never its sandbox's readiness. The wait
    between the two is the runner's queue (sandboxes are made ahead of their drive),
    which follows the run's place among the campaign's requests and the machine's load,
    not the agent: counted in, it spent a queued run's wall clock before its first step,
    weighed on the agent's latency in the report, and told a control's run apart by
    where it was queued (issue #47)."""
    if not steps:
        return datetime.now(UTC)
    first = steps[0].occurred_at - timedelta(milliseconds=steps[0].latency_ms)
    return max(ready.occurred_at, first)


async def _store_answer(store: BlobStore, final: str) -> FileRef:
    """The whole answer as a blob; AnswerNotStored says why it could not be."""
    data = final.encode(errors="replace")  # a lone surrogate is no reason to lose it
    try:
        info = await asyncio.to_thread(store.put_bytes, data)
    except Exception as e:  # local disk or S3: each raises its own types
        raise AnswerNotStored(
            f"the final answer ({len(data)} bytes) could not be stored: {type(e).__name__}: {e}"
        ) from e
    return FileRef(
        path="final-message.txt", sha256=info.sha256, size=info.size, media_type="text/plain"
    )


def _submitted(steps: Sequence[AgentStepLogged]) -> str | None:
    """The answer of a `submit` call already logged (a crash after submitting)."""
    for step in steps:
        for call in step.tool_calls:
            if call.name == "submit":
                result = next((r for r in step.tool_results if r.call_id == call.call_id), None)
                if result is not None and not result.is_error:
                    try:
                        return str(json.loads(call.arguments).get("answer", ""))
                    except (ValueError, AttributeError):
                        return ""
    return None
