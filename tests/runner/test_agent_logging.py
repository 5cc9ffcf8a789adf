"""The agent loop publishes a step while the next model call runs, never ahead of a tool."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from assay.providers import Completion, ToolCall
from assay.store import LocalBlobStore
from assay_runner.agent import AgentRun
from assay_runner.tools import ToolOutcome
from assay_schemas import (
    AgentStepLogged,
    BusError,
    Event,
    Limits,
    Producer,
    Task,
    ToolResultRecord,
)
from assay_testing.events import run_requested, sandbox_ready

pytestmark = pytest.mark.timeout(20)


class _Log:
    """What happened, in order: model calls, tool runs, publishes started and acked."""

    def __init__(self) -> None:
        self.entries: list[str] = []


class _Bus:
    producer = Producer(service="runner", version="test")

    def __init__(self, log: _Log, fail_step: int | None = None) -> None:
        self.log, self.fail_step = log, fail_step
        self.published: list[Event] = []

    async def publish(self, event: Event, *, encoded: bytes | None = None) -> None:
        if encoded is not None:  # the runner measured the event's JSON: the same bytes
            assert encoded == event.model_dump_json().encode()
        name = f"step {event.step}" if isinstance(event, AgentStepLogged) else event.event_type
        self.log.entries.append(f"publish {name}")
        await asyncio.sleep(0.02)  # the PubAck takes a while: the next model call overlaps
        if isinstance(event, AgentStepLogged) and event.step == self.fail_step:
            raise BusError(f"publish of {name} failed")
        self.published.append(event)
        self.log.entries.append(f"acked {name}")


class _Provider:
    kind, model = "openai", "m"

    def __init__(self, log: _Log, tool_steps: int) -> None:
        self.log, self.left = log, tool_steps

    async def complete(self, messages: Sequence[Any], tools: Any, params: Any) -> Completion:
        # As the SDKs' HTTP client does, a task of its own writes the request; the answer
        # comes a while later (before the 20 ms PubAck of `_Bus`).
        asyncio.get_running_loop().call_soon(self.log.entries.append, "model request")
        await asyncio.sleep(0.005)
        self.log.entries.append("model answer")
        self.left -= 1
        if self.left < 0:
            call = ToolCall(id="s", name="submit", arguments='{"answer": "done"}')
        else:
            call = ToolCall(id=f"c{self.left}", name="bash", arguments='{"command": "true"}')
        return Completion(provider="openai", model="m", tool_calls=(call,))


class _Tools:
    def __init__(self, log: _Log) -> None:
        self.log = log

    async def run(self, call: ToolCall) -> ToolOutcome:
        self.log.entries.append(f"tool {call.name}")
        record = ToolResultRecord(call_id=call.id, name=call.name, output="ok", duration_ms=0.0)
        return ToolOutcome(record, "done" if call.name == "submit" else None)


def _run(log: _Log, bus: _Bus, tool_steps: int) -> AgentRun:
    request = run_requested(
        event_id="rq",
        producer=_Bus.producer,
        task=Task(task_id="t1", prompt="go"),
        limits=Limits(max_steps=10),
    )
    ready = sandbox_ready(
        request, event_id="sr", producer=_Bus.producer, sandbox_id="s1", instance="i1"
    )
    return AgentRun(
        bus=bus,  # type: ignore[arg-type]
        request=request,
        ready=ready,
        provider=_Provider(log, tool_steps),
        tools=_Tools(log),  # type: ignore[arg-type]
        prices={},
        store=LocalBlobStore(Path(tempfile.mkdtemp(prefix="answers-"))),  # short answers: unused
    )


async def test_each_step_is_logged_before_the_next_steps_tools_and_in_order() -> None:
    log = _Log()
    bus = _Bus(log)
    finished = await _run(log, bus, tool_steps=2).run([])
    assert finished.steps == 3 and finished.stop_reason == "submitted"
    assert [e.step for e in bus.published if isinstance(e, AgentStepLogged)] == [0, 1, 2]
    assert bus.published[-1].event_type == "AgentFinished"
    # The next model call's request goes out first, then the step's publish, in flight
    # while the model answers; the tool waits for the PubAck.
    assert log.entries == [
        "model request",
        "model answer",
        "tool bash",
        "model request",
        "publish step 0",
        "model answer",
        "acked step 0",
        "tool bash",
        "model request",
        "publish step 1",
        "model answer",
        "acked step 1",
        "tool submit",
        "publish step 2",
        "acked step 2",
        "publish AgentFinished",
        "acked AgentFinished",
    ]


async def test_a_failed_step_publish_fails_the_run_before_any_later_tool_runs() -> None:
    log = _Log()
    bus = _Bus(log, fail_step=0)
    with pytest.raises(BusError):
        await _run(log, bus, tool_steps=2).run([])
    assert log.entries.count("tool bash") == 1
    assert bus.published == []


async def test_a_failed_publish_of_the_last_step_fails_the_run_before_it_finishes() -> None:
    log = _Log()
    bus = _Bus(log, fail_step=1)
    with pytest.raises(BusError):
        await _run(log, bus, tool_steps=1).run([])
    assert [e.event_type for e in bus.published] == ["AgentStepLogged"]
