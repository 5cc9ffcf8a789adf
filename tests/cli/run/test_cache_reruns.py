"""Issue #50 item 5: the development cache hits across runs of `assay run --cache`.

The same small scripted campaign (one demo agent, one demo judge, one bundled task) runs
three times in one home, each time through `run_campaign` as `assay run --cache` does: on
a new run folder, a new embedded stack and a new scripted server (on a new port). The
second run serves at least 90 % of its agent steps and judge samples from the cache, marks
them on their events, and its report counts both at its top; a third run whose task
prompt changed asks the models again.
"""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml
from rich.console import Console

from assay.bus import Bus
from assay.config import Settings
from assay.embedded import NatsServer
from assay_cli.commands._home import home_settings
from assay_cli.run import run_campaign
from assay_schemas import AgentStepLogged, Event, JudgmentRecorded

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[3]
TASK = "qpcr_ddct"


class Rerun(NamedTuple):
    steps: list[AgentStepLogged]
    samples: list[JudgmentRecorded]
    report: dict[str, Any]
    stdout: str


async def _events(workdir: Path) -> list[Event]:
    with home_settings(workdir) as settings, NatsServer(settings.home / "nats") as nats:
        async with Bus(settings.model_copy(update={"nats_url": nats.url}), service="test") as bus:
            return [e.event async for e in bus.replay()]


def _campaign(path: Path) -> Path:
    campaign = yaml.safe_load((ROOT / "examples" / "campaign.yaml").read_text())
    campaign["campaign_id"] = "rerun"
    campaign.pop("controls", None)
    campaign["agents"] = [a for a in campaign["agents"] if a["agent_id"] == "careful"]
    campaign["judges"] = [j for j in campaign["judges"] if j["judge_id"] == "judge-balanced"]
    path.write_text(yaml.safe_dump(campaign))
    return path


def _run(tasks: Path, campaign: Path, settings: Settings) -> Rerun:
    console = Console(record=True, width=200, file=io.StringIO())
    outcome = run_campaign(
        [tasks], campaign, settings=settings, console=console, timeout_s=400, cache=""
    )
    assert outcome.settled
    events = asyncio.run(_events(outcome.workdir))
    steps = [e for e in events if isinstance(e, AgentStepLogged)]
    samples = [
        e for e in events if isinstance(e, JudgmentRecorded) and e.judge_id == "judge-balanced"
    ]
    report = json.loads(outcome.report_json.read_text())
    return Rerun(steps, samples, report, console.export_text())


@pytest.fixture(scope="module")
def reruns(tmp_path_factory: pytest.TempPathFactory) -> tuple[Rerun, Rerun, Rerun]:
    tmp = tmp_path_factory.mktemp("reruns")
    tasks = tmp / "tasks"
    shutil.copytree(ROOT / "examples" / "tasks" / TASK, tasks / TASK)
    (tmp / "references").symlink_to(ROOT / "examples" / "references")
    campaign = _campaign(tmp / "campaign.yaml")
    state = Path(tempfile.mkdtemp(prefix="rerun-", dir="/tmp"))
    state.chmod(0o711)
    settings = Settings(home=tmp / "home", state_dir=state)
    first = _run(tasks, campaign, settings)
    again = _run(tasks, campaign, settings)
    prompt = tasks / TASK / "prompt.md"
    prompt.write_text(prompt.read_text() + "\nPlease also say which gene moved most.\n")
    changed = _run(tasks, campaign, settings)
    return first, again, changed


def test_a_rerun_serves_its_answers_from_the_cache_and_says_so(
    reruns: tuple[Rerun, Rerun, Rerun],
) -> None:
    first, again, _ = reruns
    assert first.steps and first.samples
    assert not any(s.cached_answer for s in first.steps)
    assert not any(s.cached_answer for s in first.samples)
    assert first.report["cached_answers"] == 0 and first.report["cached_verdicts"] == 0

    cached_steps = sum(s.cached_answer for s in again.steps)
    cached_samples = sum(s.cached_answer for s in again.samples)
    assert cached_steps >= 0.9 * len(again.steps), (cached_steps, len(again.steps))
    assert cached_samples >= 0.9 * len(again.samples), (cached_samples, len(again.samples))
    assert again.report["cached_answers"] == cached_steps
    assert again.report["cached_verdicts"] == cached_samples
    head = " ".join(again.stdout[:2500].split())
    verdicts = "verdict" if cached_samples == 1 else "verdicts"
    said = f"DEVELOPMENT CACHE: {cached_steps} agent model answers and {cached_samples} judge {verdicts}"
    assert said in head
    # A cached run goes as the first did: the same calls and the same scores.
    assert [s.tool_calls for s in again.steps] == [s.tool_calls for s in first.steps]
    assert [s.scores for s in again.samples] == [s.scores for s in first.samples]


def test_a_changed_task_prompt_misses(reruns: tuple[Rerun, Rerun, Rerun]) -> None:
    *_, changed = reruns
    assert changed.steps and changed.samples
    assert not any(s.cached_answer for s in changed.steps)
    assert not any(s.cached_answer for s in changed.samples)
    assert changed.report["cached_answers"] == 0 and changed.report["cached_verdicts"] == 0
