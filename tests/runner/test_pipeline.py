"""A multi-step run through the real SDK, the real bus and a real bubblewrap sandbox."""

from __future__ import annotations

from pathlib import Path

from assay.bus import Bus
from assay.config import Settings
from assay.store import LocalBlobStore
from assay_schemas import (
    AgentFinished,
    AgentStepLogged,
    ArtifactsSealed,
    RunRequested,
    SandboxReady,
)
from assay_testing import pipeline
from assay_testing.scripted import ScriptedModelServer, ScriptedSequence, ScriptReply

ANALYSIS = "import pandas as pd\ndf = pd.read_csv('od.csv')\nimport os\nos.makedirs('results', exist_ok=True)\ndf.groupby('strain').od.max().to_csv('results/max_od.csv')\nprint('strains', df.strain.nunique())\n"

CAREFUL = ScriptedSequence(
    [
        ScriptReply.call("bash", {"command": "ls && head -3 od.csv"}),
        ScriptReply.call("write_file", {"path": "analysis.py", "content": ANALYSIS}),
        ScriptReply.call("python", {"code": "exec(open('analysis.py').read())"}),
        ScriptReply.call(
            "submit", {"answer": "Max OD per strain is in results/max_od.csv (2 strains)."}
        ),
    ]
)


SCRIPTS = {"careful": CAREFUL}
"""What the `scripted` fixture (tests/conftest.py) serves."""


async def test_multi_step_run_logs_steps_and_seals_artifacts(
    bus: Bus, settings: Settings, tmp_path: Path, scripted: ScriptedModelServer
) -> None:
    store = LocalBlobStore(settings.blob_dir)
    folder = pipeline.write_task(
        tmp_path / "tasks",
        "growth",
        "max OD per strain?",
        {"od.csv": "strain,od\nA,0.1\nA,0.9\nB,0.5\n"},
    )
    spec = pipeline.campaign(
        "c1", [pipeline.scripted_agent("careful", "careful", scripted.openai_base_url)]
    )
    async with pipeline.services(settings, store):
        await pipeline.submit_folder(bus, store, spec, folder, max_bytes=10_000)
        events = await pipeline.wait_for_events(
            bus, lambda evs: any(isinstance(e, ArtifactsSealed) for e in evs)
        )
    kinds = [e.event_type for e in events]
    assert kinds[:3] == ["CampaignStarted", "TaskSubmitted", "RunRequested"]
    # The answer follows the runs' requests: one that lost its task id is refused instead.
    assert kinds.index("TaskAccepted") > kinds.index("RunRequested")
    steps = [e for e in events if isinstance(e, AgentStepLogged)]
    assert [s.step for s in steps] == [0, 1, 2, 3]
    assert [s.tool_calls[0].name for s in steps] == ["bash", "write_file", "python", "submit"]
    assert "od.csv" in steps[0].tool_results[0].output
    assert "strains 2" in steps[2].tool_results[0].output
    assert all(s.usage.input_tokens > 0 for s in steps)
    [finished] = [e for e in events if isinstance(e, AgentFinished)]
    assert finished.stop_reason == "submitted" and "results/max_od.csv" in finished.final_message
    [sealed] = [e for e in events if isinstance(e, ArtifactsSealed)]
    paths = {f.path: f for f in sealed.files}
    assert set(paths) == {"od.csv", "analysis.py", "results/max_od.csv"}
    assert store.get_bytes(paths["results/max_od.csv"].sha256).decode().splitlines()[1:] == [
        "A,0.9",
        "B,0.5",
    ]
    [ready] = [e for e in events if isinstance(e, SandboxReady)]
    assert ready.backend == "bubblewrap" and [f.path for f in ready.workspace] == ["od.csv"]
    [requested] = [e for e in events if isinstance(e, RunRequested)]
    assert sealed.run_id == requested.run_id == finished.run_id
