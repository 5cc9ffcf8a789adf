"""Viewer fixtures: the aggregator's synthetic campaign plus one hostile agent's run, and
the viewer over them, in-process or served by uvicorn on loopback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_schemas import (
    AgentStepLogged,
    ArtifactsSealed,
    Criterion,
    Dimension,
    DimensionScore,
    Event,
    FailureTag,
    FileRef,
    JudgmentFailed,
    JudgmentRecorded,
    Rubric,
    RunRequested,
    Task,
    TaskJudgeConfig,
    TaskSubmitted,
    TextContainsCheck,
    ToolCallRecord,
    ToolResultRecord,
    same_run,
)
from assay_testing.synthetic_log import publish_events
from assay_viewer import Source, create_app
from tests.aggregator.conftest import SPEC, Published, publish
from tests.served import serve

from .documents import docx_bytes, pdf_bytes, xlsx_bytes

HOSTILE = "evil-run"
SCRIPT = "<script>document.title='PWNED'</script>"
IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"
PAYLOAD = f"{SCRIPT}{IMG}"
DISPUTED = "disputed-run"
"""A run its two LLM judges rate 10 and 0 on every dimension: the widest spread there is."""
SEARCHED = "quokkaspectrum"
"""A word written in one step of the disputed run, and nowhere else in the log."""
EVIL_TASK = "evil-task"
"""A task whose author wrote markup into everything the agent and the judges are given."""
PYTHON_CODE = "import numpy as np\nvalues = np.array([1.5, 2.5])\nprint(values.mean())\n"
REPAIRED_SAMPLE = 1
"""The sample of the hostile run's judgment that failed (raw output kept): one the judge
takes (the counting rule refuses a sample past its `sampling_times`), its verdict left out."""


def _hostile_run(published: Published) -> list[Event]:
    """A copy of one sealed run whose agent wrote markup into names, contents and messages."""
    seal = next(e for e in published.events if isinstance(e, ArtifactsSealed) and e.files)
    store = published.store

    def put(path: str, data: str | bytes, media: str = "text/plain") -> FileRef:
        info = store.put_bytes(data.encode() if isinstance(data, str) else data)
        return FileRef(path=path, sha256=info.sha256, size=info.size, media_type=media)

    files = [
        put(f"out/{SCRIPT}.md", f"# Findings\n\n{PAYLOAD}\n\n[link](javascript:alert(1))\n"),
        put(f"{IMG}.html", f"<html><body>{PAYLOAD}</body></html>", "text/html"),
        put("plot.svg", f"<svg xmlns='http://www.w3.org/2000/svg'>{SCRIPT}</svg>", "image/svg+xml"),
        put("table.csv", f"name,value\n{SCRIPT},1\n"),
        put("analysis.py", f"print('{SCRIPT}')\n"),
        put("report.docx", docx_bytes("Findings", PAYLOAD, table=[["k", "v"], [IMG, "1"]])),
        put("results.xlsx", xlsx_bytes([["name", "value"], [SCRIPT, 1.5]])),
        put("paper.pdf", pdf_bytes(PAYLOAD)),
    ]
    out: list[Event] = []
    repaired = ""
    for e in published.events:
        if e.run_id != seal.run_id:
            continue
        if isinstance(e, JudgmentRecorded) and (e.judge_id, e.sample) == (
            repaired,
            REPAIRED_SAMPLE,
        ):
            continue  # that sample failed instead
        update: dict[str, object] = {"run_id": HOSTILE, "event_id": f"evil-{e.event_id}"}
        if isinstance(e, ArtifactsSealed):
            update |= {"files": files, "final_message": PAYLOAD, "manifest": None, "excluded": []}
        if isinstance(e, AgentStepLogged):
            result = ToolResultRecord(
                call_id="c1",
                name="bash",
                output=PAYLOAD,
                truncated=True,
                output_blob=put("out.txt", PAYLOAD * 100),
            )
            # Markup in every kind of call: code, a written file's name and content, a read.
            calls = [
                ToolCallRecord(
                    call_id="c1",
                    name="python",
                    arguments=json.dumps({"code": f"print('{PAYLOAD}')"}),
                ),
                ToolCallRecord(
                    call_id="c2",
                    name="write_file",
                    arguments=json.dumps({"path": f"{IMG}.py", "content": PAYLOAD}),
                ),
                ToolCallRecord(
                    call_id="c3", name="read_file", arguments=json.dumps({"path": SCRIPT})
                ),
                ToolCallRecord(call_id="c4", name="bash", arguments=f'{{"command": {PAYLOAD!r}'),
            ]
            read = ToolResultRecord(call_id="c3", name="read_file", output=PAYLOAD * 50)
            update |= {"model_output": PAYLOAD, "tool_calls": calls, "tool_results": [result, read]}
        if isinstance(e, JudgmentRecorded) and e.scores and not repaired:
            repaired = e.judge_id  # its first sample was repaired twice, hostile replies kept
            update |= {"attempts": 3, "rejected_outputs": put("rejected.json", f'["{PAYLOAD}"]')}
        out.append(e.model_copy(update=update))
    failed = JudgmentFailed(
        event_id="evil-failed",
        judge_id=repaired,
        sample=REPAIRED_SAMPLE,
        attempts=3,
        error="no valid verdict",
        raw_output=put("raw.txt", PAYLOAD * 2000),
        producer=out[-1].producer,
        **same_run(out[-1]),
    )
    return [*out, failed]


def _disputed_run(published: Published) -> list[Event]:
    """A copy of another sealed run: judged 10 by one LLM judge and 0 by the other, with a
    Python call and a word no other transcript holds."""
    seals = [e for e in published.events if isinstance(e, ArtifactsSealed) and e.files]
    source = seals[1].run_id
    llm = sorted(
        {
            e.judge_id
            for e in published.events
            if isinstance(e, JudgmentRecorded) and e.run_id == source and e.scores
        }
    )
    out: list[Event] = []
    for e in published.events:
        if e.run_id != source:
            continue
        update: dict[str, object] = {"run_id": DISPUTED, "event_id": f"disputed-{e.event_id}"}
        if isinstance(e, JudgmentRecorded) and e.scores:
            high = e.judge_id == llm[0]
            update["scores"] = {
                k: DimensionScore(score=10 if high else 0, reason="planted") for k in e.scores
            }
        if isinstance(e, AgentStepLogged) and e.step == 1:
            call = ToolCallRecord(
                call_id="py", name="python", arguments=json.dumps({"code": PYTHON_CODE})
            )
            result = ToolResultRecord(call_id="py", name="python", output="2.0\n", exit_code=0)
            update |= {
                "model_output": f"Computing the mean; a {SEARCHED} check first.",
                "tool_calls": [call],
                "tool_results": [result],
            }
        out.append(e.model_copy(update=update))
    return out


def _hostile_task(published: Published) -> list[Event]:
    """A task with markup in every field the task page shows, and one run requested on it."""
    request = next(e for e in published.events if isinstance(e, RunRequested))
    dimension = Dimension(key="evil", name=SCRIPT, description=PAYLOAD, anchors={8: PAYLOAD})
    rubric = Rubric(dimensions=[dimension], failure_tags=[FailureTag(key="evil", definition=IMG)])
    task = Task(
        task_id=EVIL_TASK,
        prompt=PAYLOAD,
        constraints=[PAYLOAD],
        expected_output=PAYLOAD,
        notes=PAYLOAD,
        notes_to_judges=True,
        source=IMG,
        reference_checks=[TextContainsCheck(name=SCRIPT, path=IMG, pattern=PAYLOAD)],
        judge=TaskJudgeConfig(
            method=SCRIPT,
            criteria=[Criterion(text=PAYLOAD)],
            system_prompt=PAYLOAD,
            dimensions=[IMG],
            rubric=rubric,
        ),
    )
    env = {"campaign_id": request.campaign_id, "task_id": EVIL_TASK, "producer": request.producer}
    submitted = TaskSubmitted(event_id="evil-task-submitted", task=task, **env)
    run = request.model_copy(
        update={
            "event_id": "evil-task-run",
            "run_id": "evil-task-run",
            "task_id": EVIL_TASK,
            "task": task,
        }
    )
    return [submitted, run]


@pytest.fixture
async def hostile(bus: Bus, settings: Settings) -> Published:
    """The aggregator tests' synthetic campaign and, after it, the hostile agent's run and
    the disputed run (`events` holds all of them, in log order)."""
    store = LocalBlobStore(settings.blob_dir)
    published = Published(await publish(bus, SPEC, store), store, 0)
    events = _hostile_run(published) + _disputed_run(published) + _hostile_task(published)
    await publish_events(bus.js, bus.subjects, bus.stream.name, events)
    everything = [*published.events, *events]
    return published._replace(events=everything, head=len(everything))


@pytest.fixture
async def client(settings: Settings, hostile: Published) -> AsyncIterator[httpx.AsyncClient]:
    """The viewer app over this test's log, driven in-process through ASGI."""
    source = Source(settings, resamples=200)
    transport = httpx.ASGITransport(app=create_app(source))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        yield c
    await source.close()


@pytest.fixture
async def served(settings: Settings, hostile: Published) -> AsyncIterator[str]:
    """The viewer on a free loopback port for the length of one test."""
    source = Source(settings, resamples=200)
    async with serve(create_app(source)) as url:
        yield url
    await source.close()
