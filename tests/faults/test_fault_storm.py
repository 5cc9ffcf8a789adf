"""The seeded fault storm (issue #54): every seed's campaign ends checked clean.

Per seed: a 50-run campaign on the split stack (every service its own `assay serve`
process, its own nats-server) while `StormDriver` SIGKILLs or SIGSTOPs each process at
the seed's points; after the last fault the campaign must finish, and then

- `assay check --home` finds no breach (every run ended once, no live sandbox, every
  sealed run judged by each judge, the live report equal to the replay), and the log
  itself holds exactly one AgentFinished or RunFailed per requested run;
- the aggregator's written report equals a fresh fold of the log, byte for byte;
- nothing was dead-lettered and no effect was logged twice;
- no sandbox is left.

Which seeds: two with roomy deliveries (8, 9) and two with two deliveries (2, 3, the
seeds that found the lost last delivery). Each pair lands both kinds of fault, kill and
pause, on every process (`test_the_seeds_land_every_kind_of_fault_on_every_process`):
four schedules cost CI four minutes where ten cost ten. `STORM_SEEDS=1-10` runs the ten
(or any range, to search for failing schedules). A failing seed prints its schedule and
where each fault landed: rerun it alone with `-k seed-N` (`STORM_SEEDS=N` for one not in
the default), and add it to `SEEDS`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from assay.bus import Bus
from assay.config import Settings
from assay.store import open_store
from assay_sandbox_manager.backends import BubblewrapBackend
from assay_schemas import AgentFinished, CampaignHistory, Event, RunFailed, RunRequested
from assay_testing.scripted import ScriptedModelServer

from .harness import (
    ServiceSet,
    aggregator_report,
    audit_log,
    full_report,
    log_events,
    started_bus,
)
from .storm import (
    STORM_RUNS,
    VICTIMS,
    StormDriver,
    nats_for,
    plan,
    storm_cast,
    storm_models,
    wait_for_history,
)

ROOMY_SEEDS = [8, 9]
"""Between them, every process takes both a kill and a pause (as do the `FEW` seeds)."""


def _seeds() -> list[int]:
    """`ROOMY_SEEDS`, or `STORM_SEEDS=A-B` (inclusive) to run others or search for failing ones."""
    chosen = os.environ.get("STORM_SEEDS")
    if not chosen:
        return ROOMY_SEEDS
    first, _, last = chosen.partition("-")
    return list(range(int(first), int(last or first) + 1))


SEEDS = _seeds()
ACK_WAIT_S = 2.0
"""Short, so that a pause outlasts it within seconds (the default is minutes)."""
MAX_DELIVER = int(os.environ.get("STORM_MAX_DELIVER", "20"))
"""Room for the redeliveries a storm causes: giving up after the configured deliveries is
its own path (a run given up on must still end once), tested by the `FEW` cases."""
ROOMY = 10
"""Deliveries no storm exhausts: with as many, nothing may be dead-lettered."""
FEW_DELIVERIES = 2
FEW = [(2, FEW_DELIVERIES), (3, FEW_DELIVERIES)]
"""Seeds that, with two deliveries, once left a run running forever: its last delivery
died with its consumer (JetStream drops it silently); the bus now hears JetStream's
max-deliveries advisory and gives the message up: a run it left unended gets RunFailed
(how many messages are lost depends on the machine's load: seen 0 to 9 per seed)."""
FINISH_S = float(os.environ.get("STORM_FINISH_S", "240"))
"""How long the campaign may take to finish after the last fault."""

pytestmark = pytest.mark.timeout(480)


@pytest.fixture(scope="module")
def models() -> Iterator[ScriptedModelServer]:
    """The storm's scripted models, shared by its seeds."""
    with storm_models() as server:
        yield server


class Checked(NamedTuple):
    """What the end-of-storm check ran and said."""

    command: str
    rc: int
    doc: dict[str, Any]
    """Its JSON: clean, runs, log_sequence, breaches."""
    output: str


def check_home(home: Path) -> Checked:
    """`assay check` on the storm's log, as a user runs it on a finished run directory.

    No grace: the campaign has finished, so a run or verdict still pending is a breach.
    """
    args = ["check", "--json", "--grace", "0", "--home", str(home)]
    proc = subprocess.run(
        [sys.executable, "-m", "assay_cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        doc = {}
    return Checked(f"assay {' '.join(args[:-2])}", proc.returncode, doc, proc.stdout + proc.stderr)


def terminal_outcomes(events: list[Event]) -> dict[str, list[str]]:
    """Run id -> its AgentFinished / RunFailed events, for every requested run."""
    out: dict[str, list[str]] = {e.run_id or "": [] for e in events if isinstance(e, RunRequested)}
    for e in events:
        if isinstance(e, AgentFinished | RunFailed):
            out.setdefault(e.run_id or "", []).append(e.event_type)
    return out


async def deliveries_by_durable(bus: Bus) -> dict[str, int]:
    """Messages each durable consumer was handed, redeliveries included (its consumer
    sequence): above what it consumes undisturbed when the storm made it redeliver."""
    infos = await bus.js.consumers_info(bus.settings.stream)
    durable = sorted((i for i in infos if i.config.durable_name), key=lambda i: i.name)
    return {i.name: i.delivered.consumer_seq for i in durable}


class DeadLetter(NamedTuple):
    """What a consumer gave up on: the run it stood for, else its task, else its campaign."""

    durable: str
    event_type: str | None
    run_id: str | None
    task_id: str | None
    campaign_id: str | None


async def dead_letters(bus: Bus, deliveries: dict[str, int]) -> list[DeadLetter]:
    """Each dead letter of every durable consumer, with the ids it carries."""
    out = []
    for durable in deliveries:
        for data, _ in await bus.dead_letters(durable):
            doc = json.loads(data)
            task = doc.get("task")
            task_id = task.get("task_id") if isinstance(task, dict) else None
            out.append(
                DeadLetter(
                    durable,
                    doc.get("event_type"),
                    doc.get("run_id"),
                    task_id,
                    doc.get("campaign_id"),
                )
            )
    return out


def runs_behind(letter: DeadLetter, events: list[Event]) -> set[str]:
    """The runs a dead letter stood for: its own run; for a task's message (TaskSubmitted:
    the runner's door gave up on it), every run of that task; for a campaign's
    (CampaignStarted: the catch-up that admits its tasks), every run of the campaign."""
    if letter.run_id:
        return {letter.run_id}
    requested = [e for e in events if isinstance(e, RunRequested)]
    ours = [e for e in requested if e.campaign_id == letter.campaign_id]
    if letter.task_id:
        ours = [e for e in ours if e.task.task_id == letter.task_id]
    return {e.run_id or "" for e in ours}


async def unended_story(bus: Bus) -> str:
    """Each requested run with no end yet, with its events in log order, and every dead
    letter: what a storm that left a run running shows of it (the next one to look)."""
    events = await log_events(bus)
    unended = {run for run, ends in terminal_outcomes(events).items() if not ends}
    lines = []
    for run in sorted(unended):
        kinds = [e.event_type for e in events if e.run_id == run]
        lines.append(f"  {run}: {' '.join(kinds)}")
    letters = await dead_letters(bus, await deliveries_by_durable(bus))
    lines += [f"  dead letter: {letter}" for letter in letters]
    return "runs with no end, and the dead letters:\n" + "\n".join(lines)


def _done(history: CampaignHistory) -> bool:
    return len(history.expected) == STORM_RUNS and history.complete


def test_schedule_is_the_seeds_and_hits_every_process() -> None:
    first = plan(7, ack_wait_s=ACK_WAIT_S)
    assert first == plan(7, ack_wait_s=ACK_WAIT_S)
    assert first != plan(8, ack_wait_s=ACK_WAIT_S)
    assert {f.victim for f in first} == set(VICTIMS)
    assert [f.after for f in first] == sorted(f.after for f in first)
    assert all(f.hold_s > ACK_WAIT_S for f in first if f.kind == "pause")
    assert all(f.hold_s <= 2.0 for f in first if f.kind == "kill")


def _landed(seeds: list[int]) -> set[tuple[str, str]]:
    """(process, kind) of every fault the seeds' schedules land."""
    return {(f.victim, f.kind) for seed in seeds for f in plan(seed, ack_wait_s=ACK_WAIT_S)}


def test_the_seeds_land_every_kind_of_fault_on_every_process() -> None:
    """Fewer seeds than the ten once run, no fault left out: kill and pause, each process."""
    every = {(victim, kind) for victim in VICTIMS for kind in ("kill", "pause")}
    assert _landed(ROOMY_SEEDS) == every
    assert _landed([seed for seed, _ in FEW]) == every


def _case_id(case: tuple[int, int]) -> str:
    seed, deliveries = case
    return f"seed-{seed}" if deliveries == MAX_DELIVER else f"seed-{seed}-deliver-{deliveries}"


@pytest.mark.slow
@pytest.mark.parametrize("case", [(seed, MAX_DELIVER) for seed in SEEDS] + FEW, ids=_case_id)
async def test_fault_storm(
    case: tuple[int, int], settings: Settings, models: ScriptedModelServer, tmp_path: Path
) -> None:
    seed, max_deliver = case
    schedule = plan(seed, ack_wait_s=ACK_WAIT_S)
    print(f"\n[storm seed {seed}] schedule:\n  " + "\n  ".join(map(str, schedule)))
    # The stream and prefix `--home` reads; the storm's own server, which it kills.
    own = settings.model_copy(
        update={
            "home": tmp_path / "home",
            "stream": "ASSAY",
            "subject_prefix": "assay",
            "ack_wait_s": ACK_WAIT_S,
            "max_deliver": max_deliver,
        }
    )
    server = nats_for(own)
    server.start()
    try:
        own = own.model_copy(update={"nats_url": server.url})
        cast = storm_cast(models, tmp_path / "cast")
        async with started_bus(own) as bus, ServiceSet.running(own, cast) as services:
            await cast.submit(bus, open_store(own))
            driver = StormDriver(bus, services, server, schedule)
            try:
                async with driver.supervising():
                    await driver.run()
                    stormed = time.monotonic()
                    history = await wait_for_history(bus, _done, timeout=FINISH_S)
                    want = await full_report(bus)
                    deadline = time.monotonic() + 60
                    while aggregator_report(own) != want:
                        assert time.monotonic() < deadline, (
                            "aggregator report never equalled a rebuild"
                        )
                        await asyncio.sleep(0.5)
                    finished = time.monotonic()
                events = await log_events(bus)
                audit = await audit_log(bus)
                deliveries = await deliveries_by_durable(bus)
                given_up = await dead_letters(bus, deliveries)
            except AssertionError as e:
                unended = await unended_story(bus)
                raise AssertionError(
                    f"seed {seed}: {e}\n{unended}\n{driver.describe()}\n{services.log_tail()}"
                ) from e
        state = own.instance_state
        left = BubblewrapBackend(state / "bwrap", state / "seals").list_live()
    finally:
        server.stop()
    checked = check_home(own.home)
    times = (
        f"storm {stormed - driver.began:.0f}s, finish {finished - stormed:.0f}s, "
        f"check {time.monotonic() - finished:.0f}s"
    )

    outcomes = terminal_outcomes(events)
    ends = Counter(kind for kinds in outcomes.values() for kind in kinds)
    kinds = Counter(f.kind for f in schedule)
    print(
        f"[storm seed {seed}] {len(schedule)} faults ({kinds['kill']} kills, {kinds['pause']} "
        f"pauses) over {len(set(f.victim for f in schedule))} processes; {len(outcomes)} runs "
        f"requested, {dict(ends)}; {history.state_counts()}; verdicts {history.verdicts}/"
        f"{history.expected_judgments}; {audit.n_events} events, dead letters "
        f"{audit.dead_letters} {given_up}, duplicates {audit.n_duplicates}; deliveries {deliveries}; sandboxes left {len(left)}; "
        f"`{checked.command}` rc={checked.rc}; {times}\n{checked.output.strip()}"
    )
    story = f"seed {seed}\n{driver.describe()}"
    print(story)
    assert checked.rc == 0, f"{checked.command} found breaches:\n{checked.output}\n{story}"
    assert checked.doc["clean"] and checked.doc["runs"] == STORM_RUNS, checked.output
    assert len(outcomes) == STORM_RUNS, story
    twice = {r: k for r, k in outcomes.items() if len(k) != 1}
    assert not twice, f"runs without exactly one terminal outcome: {twice}\n{story}"
    if max_deliver >= ROOMY:
        assert audit.dead_letters == 0, story
    else:  # given up (a lost last delivery included), yet no run is left without its end
        assert len(given_up) == audit.dead_letters, f"{given_up}\n{story}"
        # A letter that stood for no run (a task or campaign message) holds its task's or
        # campaign's runs to account: each requested and ended once, by another delivery's
        # or the campaign's catch-up's work. One that stands for no requested run fails.
        unended = {
            letter: behind
            for letter in given_up
            if not (behind := runs_behind(letter, events))
            or any(len(outcomes.get(r, [])) != 1 for r in behind)
        }
        assert not unended, f"dead-lettered, and not ended once: {unended}\n{story}"
    assert audit.n_duplicates == 0, f"{audit.duplicate_ids} ids, {audit.duplicate_effects}\n{story}"
    assert not left, f"sandboxes left after every run ended: {left}\n{story}"
