"""Third-party agent frameworks as program agents: installed from PyPI into a runtime
extension, driven by the scripted model through the run's gateway, sealed and judged."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.bus import Bus
from assay.campaign import submit_campaign
from assay.config import Settings
from assay.store import LocalBlobStore
from assay.tasks import load_tasks
from assay_sandbox_manager import extension
from assay_sandbox_manager.extension import ensure_extension, extension_hash
from assay_schemas import (
    AgentFinished,
    AgentSpec,
    AgentStepLogged,
    ArtifactsSealed,
    Event,
    JudgeSpec,
    JudgmentRecorded,
    Price,
    ProgramSpec,
    RunFailed,
    SandboxReady,
)
from assay_testing.demo import JudgeTemper, judge_script
from assay_testing.pipeline import SCRIPTED_KEY, campaign, services, wait_for_events, write_task
from assay_testing.scripted import ScriptedModelServer, ScriptReply, ScriptRequest

AGENTS = Path(__file__).parents[2] / "examples" / "agents"
SMOLAGENTS = "smolagents[openai]==1.26.0"
OPENAI_AGENTS = "openai-agents==0.24.0"
SECRET = "sk-test-frameworks-never-in-the-sandbox"
TABLE = {"od.csv": "strain,od\nA,0.9\nB,0.4\n"}


@pytest.fixture(scope="module")
def smolagents_runtime() -> str:
    """The extension built (or found cached) before any sandbox waits on it."""
    ensure_extension([SMOLAGENTS])
    return SMOLAGENTS


@pytest.fixture(scope="module")
def openai_agents_runtime() -> str:
    """The extension built (or found cached) before any sandbox waits on it."""
    ensure_extension([OPENAI_AGENTS])
    return OPENAI_AGENTS


@pytest.fixture
def scripted() -> Iterator[ScriptedModelServer]:
    os.environ[SCRIPTED_KEY] = SECRET
    judge = judge_script(JudgeTemper("j", shift=0))
    with ScriptedModelServer({"judge": judge}) as server:
        yield server
    os.environ[SCRIPTED_KEY] = "scripted"


def _code_agent_model(request: ScriptRequest) -> ScriptReply:
    """CodeAgent's model: read the table in its first step, answer from what it printed."""
    if request.turn == 0:
        code = (
            "import csv, io\n"
            "rows = list(csv.DictReader(io.StringIO(read_file('od.csv'))))\n"
            "print('max od', max(float(r['od']) for r in rows))"
        )
        return ScriptReply(text=f"Thought: read the table.\n<code>\n{code}\n</code>")
    seen = str(request.messages[-1])
    answer = "A peaks at 0.9" if "max od 0.9" in seen else "I could not read the table"
    return ScriptReply(text=f"Thought: done.\n<code>\nfinal_answer({answer!r})\n</code>")


def _tool_calling_model(request: ScriptRequest) -> ScriptReply:
    """A tool-calling model: read the table, then answer from what the tool returned."""
    if request.turn == 0:
        return ScriptReply.call("read_file", {"path": "od.csv"})
    seen = str(request.messages[-1])
    return ScriptReply(text="A peaks at 0.9" if "A,0.9" in seen else "no table")


def _program_agent(model: str, source: str, package: str, server: ScriptedModelServer) -> AgentSpec:
    program = ProgramSpec(
        command=_as_file((AGENTS / source).read_text(), source),
        answer_file="answer.txt",
        packages=[package],
    )
    return AgentSpec(
        agent_id=model,
        model=model,
        base_url=server.openai_base_url,
        api_key_env=SCRIPTED_KEY,
        kind="program",
        program=program,
    )


def _as_file(source: str, name: str) -> list[str]:
    """The program's command: its source saved as a file first (frameworks such as
    smolagents read their tools' source back), then run."""
    script = f'printf %s "$1" > /tmp/{name} && exec python3 /tmp/{name}'
    return ["/bin/sh", "-c", script, "sh", source]


def _judge(server: ScriptedModelServer) -> JudgeSpec:
    return JudgeSpec(
        judge_id="j",
        model="judge",
        base_url=server.openai_base_url,
        api_key_env=SCRIPTED_KEY,
        family="scripted",
    )


async def _campaign_through_judgment(
    bus: Bus, settings: Settings, tmp_path: Path, agent: AgentSpec, judge: JudgeSpec
) -> list[Event]:
    store = LocalBlobStore(settings.blob_dir)
    folder = write_task(tmp_path / "tasks", "growth", "Which strain peaks, at what OD?", TABLE)
    spec = campaign(
        "c1",
        [agent],
        judges=[judge],
        scripted=True,
        prices={agent.model: Price(input_per_mtok=1, output_per_mtok=2)},
    )
    async with services(settings, store, judges=[judge]):
        await submit_campaign(bus, store, spec, load_tasks(folder, max_bytes=10_000))
        events = await wait_for_events(
            bus,
            lambda evs: any(isinstance(e, JudgmentRecorded | RunFailed) for e in evs),
            timeout=180,
        )
    assert not [e for e in events if isinstance(e, RunFailed)], events
    return events


async def test_smolagents_code_agent_runs_end_to_end_through_the_gateway(
    bus: Bus,
    settings: Settings,
    tmp_path: Path,
    scripted: ScriptedModelServer,
    smolagents_runtime: str,
) -> None:
    scripted.add_script("smol", _code_agent_model)
    agent = _program_agent("smol", "smolagents_agent.py", smolagents_runtime, scripted)
    events = await _campaign_through_judgment(bus, settings, tmp_path, agent, _judge(scripted))

    [ready] = [e for e in events if isinstance(e, SandboxReady)]
    assert ready.image_digest.endswith(f"+ext-{extension_hash([SMOLAGENTS])}")
    steps = [e for e in events if isinstance(e, AgentStepLogged)]
    assert [s.step for s in steps] == [0, 1]  # every model call, in order
    assert "read_file('od.csv')" in steps[0].model_output
    assert "final_answer('A peaks at 0.9')" in steps[1].model_output
    assert all(s.usage.input_tokens > 0 and s.cost_usd > 0 for s in steps)
    [finished] = [e for e in events if isinstance(e, AgentFinished)]
    assert (finished.stop_reason, finished.final_message) == ("submitted", "A peaks at 0.9")
    assert finished.cost_usd == pytest.approx(sum(s.cost_usd for s in steps))
    [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
    assert "answer.txt" in {f.path for f in sealed.files}
    [judged] = [e for e in events if isinstance(e, JudgmentRecorded)]
    assert judged.run_id == finished.run_id
    # Upstream saw both calls with the real key; the program saw only the gateway.
    recorded = scripted.requests("smol")
    assert len(recorded) == 2
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in recorded)
    output = LocalBlobStore(settings.blob_dir).get_bytes(finished.output_sha256 or "")
    assert SECRET.encode() not in output


async def test_openai_agents_runs_streamed_end_to_end_through_the_gateway(
    bus: Bus,
    settings: Settings,
    tmp_path: Path,
    scripted: ScriptedModelServer,
    openai_agents_runtime: str,
) -> None:
    scripted.add_script("oa", _tool_calling_model)
    agent = _program_agent("oa", "openai_agents_agent.py", openai_agents_runtime, scripted)
    events = await _campaign_through_judgment(bus, settings, tmp_path, agent, _judge(scripted))

    steps = [e for e in events if isinstance(e, AgentStepLogged)]
    assert [s.step for s in steps] == [0, 1]
    assert [c.name for c in steps[0].tool_calls] == ["read_file"]
    assert steps[1].model_output == "A peaks at 0.9"
    assert all(s.usage.input_tokens > 0 and s.cost_usd > 0 for s in steps)
    [finished] = [e for e in events if isinstance(e, AgentFinished)]
    assert (finished.stop_reason, finished.final_message) == ("submitted", "A peaks at 0.9")
    assert any(isinstance(e, JudgmentRecorded) for e in events)
    # The SDK streamed every call (the gateway answered with SSE); upstream got plain ones.
    assert len(scripted.requests("oa")) == 2
    store = LocalBlobStore(settings.blob_dir)
    assert all(b'"stream"' not in store.get_bytes(s.request_sha256 or "") for s in steps)
    output = store.get_bytes(finished.output_sha256 or "").decode()
    streamed = re.search(r"(\d+) streamed model events", output)
    assert streamed is not None and int(streamed[1]) >= 4, output[-2000:]


async def test_a_runtime_that_cannot_be_built_fails_the_run_as_infrastructure(
    bus: Bus,
    settings: Settings,
    tmp_path: Path,
    scripted: ScriptedModelServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_such_package(packages: object, folder: object) -> None:
        raise extension.ExtensionBuildFailed("No matching distribution for assay-no-such-pkg")

    monkeypatch.setattr(extension, "_build", no_such_package)
    agent = _program_agent("smol", "smolagents_agent.py", "assay-no-such-pkg==0.0.1", scripted)
    store = LocalBlobStore(settings.blob_dir)
    folder = write_task(tmp_path / "tasks", "growth", "Which strain peaks?", TABLE)
    async with services(settings, store):
        await submit_campaign(
            bus, store, campaign("c1", [agent]), load_tasks(folder, max_bytes=10_000)
        )
        events = await wait_for_events(bus, lambda evs: any(isinstance(e, RunFailed) for e in evs))
    [failed] = [e for e in events if isinstance(e, RunFailed)]
    assert (failed.stage, failed.infrastructure) == ("sandbox", True)
    assert "No matching distribution" in failed.error
    assert not scripted.requests("smol")
