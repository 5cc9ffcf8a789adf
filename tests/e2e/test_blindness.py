"""Blind means blind (issue #47): measured, not asserted.

The bundled campaign (examples/campaign.yaml: every bundled task, its references'
controls, the scripted cast) runs through the real stack; then everything a judge
service or a reviewer can read of each run (`bench.blindness.run_features`) goes to a
cross-validated logistic regression that tries to tell the controls from the agents'
runs. At chance its AUC is 0.5; the platform promises at most 0.6.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import yaml
from rich.console import Console
from scipy.stats import mannwhitneyu

from assay.bus import Bus, decode_log, read_raw
from assay.config import Settings
from assay_cli.commands._home import home_settings
from assay_cli.demo import agent_scripts, judge_scripts
from assay_cli.run import run_campaign
from assay_cli.scripted import ScriptedModelServer
from assay_schemas import Event
from bench.blindness import (
    Blindness,
    BlindnessWarning,
    blindness_auc,
    control_labels,
    group_aucs,
    run_features,
    top_tells,
)

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]
CHANCE = 0.6
"""The most AUC a classifier may reach on what judges and reviewers read."""


class Campaign(NamedTuple):
    events: list[Event]
    server: ScriptedModelServer


async def _events(settings: Settings) -> list[Event]:
    async with Bus(settings, service="cli") as bus:
        raws = read_raw(bus.js, bus.stream.name, subject=bus.subjects.events)
        return [logged.event async for logged in decode_log(raws)]


def _run(tmp: Path, campaign: dict[str, object]) -> Campaign:
    path = tmp / "campaign.yaml"
    campaign["controls"] = {**dict(campaign.get("controls") or {}),  # type: ignore[call-overload]
                            "references": str(ROOT / "examples" / "references")}  # fmt: skip
    path.write_text(yaml.safe_dump(campaign))
    server = ScriptedModelServer(
        {**agent_scripts(ROOT / "examples" / "solutions"), **judge_scripts()}
    ).start()
    state = Path(tempfile.mkdtemp(prefix="blind-", dir="/tmp"))
    state.chmod(0o711)
    settings = Settings(home=tmp / "home", state_dir=state)
    outcome = run_campaign(
        ROOT / "examples" / "tasks", path, settings=settings,
        console=Console(record=True, width=200), timeout_s=800, scripted_server=server,
    )  # fmt: skip
    with home_settings(outcome.workdir) as reopened:
        events = asyncio.run(_events(reopened))
    return Campaign(events, server)


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campaign]:
    campaign = yaml.safe_load((ROOT / "examples" / "campaign.yaml").read_text())
    ran = _run(tmp_path_factory.mktemp("bundled"), campaign)
    try:
        yield ran
    finally:
        ran.server.stop()


def _measure(events: list[Event]) -> tuple[Blindness, list[tuple[str, float]]]:
    features = run_features(events)
    controls = control_labels(events)
    assert controls and controls <= set(features), "every control is a run of the log"
    found = blindness_auc(features, controls, seed=47)
    print(f"\nAUC by feature group: {group_aucs(features, controls, seed=47)}")
    return found, top_tells(features, controls)


def test_a_classifier_cannot_tell_controls_from_agents_runs_in_the_bundled_campaign(
    bundled: Campaign,
) -> None:
    found, tells = _measure(bundled.events)
    print(f"\nbundled: AUC {found.auc:.3f} ({found.n_controls} controls, "
          f"{found.n_agent_runs} agents' runs, {found.folds} folds); tells: {tells[:5]}")  # fmt: skip
    assert found.n_controls >= 8 and found.n_agent_runs >= 8
    assert found.auc <= CHANCE, f"AUC {found.auc:.3f}: controls are told by {tells[:5]}"


def test_the_auc_is_the_mann_whitney_statistic_of_the_out_of_fold_scores() -> None:
    """An independent computation: AUC = U / (n_pos · n_neg) (ties count one half)."""
    rng = np.random.default_rng(3)
    features = {f"r{i}": {"x": float(rng.normal(i % 2, 1.0)), "tag": "a"} for i in range(40)}
    controls = {f"r{i}" for i in range(40) if i % 2}
    found = blindness_auc(features, controls, seed=1)
    pos = [s for s, y in zip(found.scores, found.labels, strict=True) if y]
    neg = [s for s, y in zip(found.scores, found.labels, strict=True) if not y]
    u = mannwhitneyu(pos, neg).statistic
    assert found.auc == pytest.approx(u / (len(pos) * len(neg)), abs=1e-12)
    assert found.auc > 0.6, "a planted difference is found"


def test_a_planted_tell_is_found_and_noise_stays_at_chance() -> None:
    rng = np.random.default_rng(7)
    noise = {f"r{i}": {"x": float(rng.normal()), "y": float(rng.normal())} for i in range(200)}
    controls = {f"r{i}" for i in range(0, 200, 4)}
    assert blindness_auc(noise, controls, seed=2).auc <= CHANCE
    told = {
        r: {**f, "agent.model": "control" if r in controls else "gpt"} for r, f in noise.items()
    }
    assert blindness_auc(told, controls, seed=2).auc > 0.95


def test_too_few_controls_warn_and_carry_no_auc() -> None:
    features = {f"r{i}": {"x": float(i)} for i in range(10)}
    with pytest.warns(BlindnessWarning, match="at least"):
        found = blindness_auc(features, {"r1", "r2"})
    assert np.isnan(found.auc) and found.warnings


_RUN_ID = re.compile(r"\b[0-9a-f]{16,64}\b")


def test_a_control_and_an_agents_run_with_the_same_work_reach_the_judge_alike(
    bundled: Campaign,
) -> None:
    """What the judge's model server receives depends on the work, not on who did it:
    judge requests about a control and about an agent's run that leave the same files
    and message are identical once run ids and hashes are masked."""
    requests = bundled.server.requests("scripted-judge-balanced")
    assert requests
    by_case: dict[str, set[str]] = {}
    for rec in requests:
        text = _RUN_ID.sub("<id>", json.dumps(rec.body, sort_keys=True))
        by_case.setdefault(text, set()).add(text)
    # Same masked body, one request: the masking is the only difference allowed.
    assert all(len(v) == 1 for v in by_case.values())
