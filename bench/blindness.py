"""How blind are the judges and reviewers? A classifier tries to tell controls from agents.

For every run of a campaign, :func:`run_features` collects what a judge service or a
reviewer can read of it (issue #47): the run request's fields (agent id, kind, model,
family, limits), its step events (counts, tokens, latencies, tool calls, the
transcript's shape), its end (steps, tokens, duration, stop reason), its seal (file
names, sizes, media types, exclusions, the final message) and when each arrived
relative to the campaign's start, and what a reader of the whole log has beside (whether
its agent is in the campaign's roster, its agent's runs on the task, and the task's sealed
``ControlDeclared`` events as a reader without the controls secret sees them: how many).
The declarations, opened with the home's key, give the labels. :func:`blindness_auc` then
trains a classifier, cross-validated, to tell the controls from the agents' runs (a
logistic regression, or a random forest for what differs only in combination): an AUC
near 0.5 means nothing read marks a control, near 1 that something does.
:func:`top_tells` names the features that carried it.
The features are read in `bench.blindness_features`, the classifier is
`bench.blindness_model`; this module runs the campaign and re-exports both.

`python -m bench.blindness [--salts N]` (and the ``blindness`` suite of ``make bench``,
one salt) runs the bundled scripted campaign and prints the AUC.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from rich.console import Console

from assay.bus import Bus, decode_log, read_raw
from assay.config import Settings
from assay.security.controls import controls_key
from assay_schemas import ControlDeclared, ControlDetails, Event
from bench.blindness_features import (
    Features,
    control_labels,
    openings_no_agent_made,
    run_features,
)
from bench.blindness_model import (
    Blindness,
    BlindnessWarning,
    blindness_auc,
    group_aucs,
    top_tells,
)
from bench.table import Row

__all__ = [
    "Blindness",
    "BlindnessWarning",
    "Campaign",
    "Features",
    "bench_blindness",
    "blindness_auc",
    "bundled_campaign",
    "control_labels",
    "group_aucs",
    "openings_no_agent_made",
    "run_features",
    "top_tells",
]


ROOT = Path(__file__).resolve().parents[1]


class Campaign(NamedTuple):
    """A finished campaign: its whole log, the model server that answered it, its report."""

    events: list[Event]
    server: Any
    """The started `ScriptedModelServer` (the caller stops it): what the judges received."""
    report: dict[str, Any]
    controls: list[ControlDetails]
    """Its control declarations, opened with the home's controls key (the labels)."""


async def _events(settings: Settings) -> list[Event]:
    async with Bus(settings, service="cli") as bus:
        raws = read_raw(bus.js, bus.stream.name, subject=bus.subjects.events)
        return [logged.event async for logged in decode_log(raws)]


def bundled_campaign(tmp: Path, update: Mapping[str, Any] | None = None) -> Campaign:
    """examples/campaign.yaml (with `update` over it) over every bundled task, run on a
    fresh embedded stack under `tmp` with the scripted cast; the server is left running."""
    from assay_cli.commands._home import home_settings
    from assay_cli.run import run_campaign
    from assay_testing.demo import agent_scripts, judge_scripts
    from assay_testing.scripted import ScriptedModelServer

    campaign = yaml.safe_load((ROOT / "examples" / "campaign.yaml").read_text())
    campaign.update(update or {})
    controls = dict(campaign.get("controls") or {})
    controls["references"] = str(ROOT / "examples" / "references")
    # Measured as real campaigns run: each control chooses its plan by its look-alike's
    # kinds of work (the demo file turns that off to keep its report fixed).
    if "like_agents" not in dict((update or {}).get("controls") or {}):
        controls["like_agents"] = True
    campaign["controls"] = controls
    path = tmp / "campaign.yaml"
    path.write_text(yaml.safe_dump(campaign))
    # Sampled: each epoch of an agent on a task draws its own kind of work, as a sampled
    # model's runs differ (a cast repeating itself leaves a task's other controls alone).
    scripts = agent_scripts(ROOT / "examples", sampled=True)
    server = ScriptedModelServer({**scripts, **judge_scripts()}).start()
    state = Path(tempfile.mkdtemp(prefix="blind-", dir="/tmp"))
    state.chmod(0o711)
    settings = Settings(home=tmp / "home", state_dir=state)
    outcome = run_campaign(
        ROOT / "examples" / "tasks",
        path,
        settings=settings,
        console=Console(record=True, width=200),
        timeout_s=800,
        scripted_server=server,
    )
    with home_settings(outcome.workdir) as reopened:
        events = asyncio.run(_events(reopened))
        key = controls_key(reopened)
    declared = [key.open(e) for e in events if isinstance(e, ControlDeclared)]
    return Campaign(events, server, json.loads(outcome.report_json.read_text()), declared)


def bench_blindness(salts: int = 1) -> list[Row]:
    """The classifiers' AUC on the bundled scripted campaign (target: at most 0.6): the
    regression's, each feature group's alone beside it, and the forest's (what differs
    only in combination); over `salts` campaigns (each home draws its own controls
    secret, so its own look-alikes, ids and slots), their mean with the range."""
    found: list[float] = []
    forest: list[float] = []
    groups: dict[str, list[float]] = {}
    unseen: list[float] = []
    sizes = ""
    for _ in range(salts):
        with tempfile.TemporaryDirectory(prefix="bench-blind-") as tmp:
            ran = bundled_campaign(Path(tmp))
            ran.server.stop()
        features = run_features(ran.events)
        controls = control_labels(ran.controls)
        overall = blindness_auc(features, controls, seed=47)
        found.append(overall.auc)
        forest.append(blindness_auc(features, controls, seed=47, classifier="forest").auc)
        sizes = f"{overall.n_controls} vs {overall.n_agent_runs}"
        for group, auc in group_aucs(features, controls, seed=47).items():
            groups.setdefault(group, []).append(auc)
        unseen.append(len(openings_no_agent_made(features, controls)) / max(1, len(controls)))
    over = f", {salts} salts: mean, range {{}}" if salts > 1 else "{}"
    name = f"classifier AUC, controls vs agents' runs ({sizes}, bundled)"
    rows = [_row(name, found, over)]
    rows += [_row(f"  {group} fields alone", aucs, over) for group, aucs in groups.items()]
    rows.append(_row(f"random forest AUC, the same runs ({sizes}, bundled)", forest, over))
    opened = "controls opening with a tool no agent's run of their model opened with"
    mean = f", {salts} salts: mean" if salts > 1 else ""
    share = sum(unseen) / len(unseen)
    rows.append(Row("blindness", f"{opened} (bundled{mean})", share, "share", target="0"))
    return rows


def _row(name: str, aucs: list[float], over: str) -> Row:
    spread = f" {min(aucs):.2f}-{max(aucs):.2f}" if len(aucs) > 1 else ""
    mean = sum(aucs) / len(aucs)
    return Row("blindness", name + over.format(spread), mean, "AUC", 0.5, "chance", "≤ 0.6")


def main(argv: list[str] | None = None) -> None:
    """`python -m bench.blindness [--salts N]`: the rows, printed."""
    import argparse

    from bench.table import print_rows

    parser = argparse.ArgumentParser(
        prog="python -m bench.blindness",
        description="Run the bundled scripted campaign (controls included) and print how "
        "well a cross-validated logistic regression tells control runs from agents' runs, "
        "on every readable field and on each feature group alone, and how well a random "
        "forest does on every field (AUC; chance 0.5, target at most 0.6).",
    )
    parser.add_argument(
        "--salts",
        type=int,
        default=1,
        help="campaigns to run, each with its own controls secret (default 1); "
        "rows then show the mean AUC and its range",
    )
    print_rows(bench_blindness(max(1, parser.parse_args(argv).salts)))


if __name__ == "__main__":
    main()
