"""Issue #47: a control chooses at its first step which of its task's plans it plays, in
proportion to how often the agent it wears did each kind of work (`assay_runner.choice`)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pytest
from scipy.stats import binomtest

from assay.security.controls import ControlsKey
from assay.store import LocalBlobStore
from assay_runner.book import AgentBook, Turn, Work
from assay_runner.choice import GOOD_SHARE, choose_plan, plan_weights, weighs_kinds
from assay_runner.handlers.driver import ChoiceLost, Driver
from assay_schemas import (
    AgentSpec,
    AgentStepLogged,
    ControlDetails,
    ControlFile,
    ControlPlan,
    RunRequested,
    Task,
)
from assay_testing.events import TEST_PRODUCER, run_requested

RAN = Work(ran=True, wrote=True)
DRAFTED = Work(ran=False, wrote=True)
SAID = Work(ran=False, wrote=False)
PLANS = {
    "reference": "a" * 64,
    "altered_numbers": "b" * 64,
    "not_executed": "c" * 64,
    "prose_only": "d" * 64,
}
WORKS = {
    PLANS["reference"]: RAN,
    PLANS["altered_numbers"]: RAN,
    PLANS["not_executed"]: DRAFTED,
    PLANS["prose_only"]: SAID,
}


def _declared(
    variant: str, agent: str, *, task: str = "t1", chooses: bool = True
) -> ControlDetails:
    return ControlDetails(
        campaign_id="c",
        task_id=task,
        control_run_id=f"r{variant[:3]}{agent}{task}",
        variant=variant,  # type: ignore[arg-type]
        expected="pass" if variant == "reference" else "fail",
        plan_sha256=PLANS[variant],
        agent_id=agent,
        like="careful",
        max_steps=10 + len(variant),
        chooses=chooses,
    )


DECLARED = [_declared(v, f"k{i}") for i, v in enumerate(PLANS)]


GOOD = {PLANS["reference"]}


def test_plan_weights_are_the_look_alikes_shares_of_each_kind_by_hand() -> None:
    seen = Counter({RAN: 8, SAID: 2, Work(ran=True, wrote=False): 5})  # a kind on no plan
    w = plan_weights(WORKS, GOOD, seen)
    # Of the kinds on offer (3), the look-alike did 10 runs: 8 ran, 2 said, none drafted.
    assert w[PLANS["reference"]] == 8 / 10 * GOOD_SHARE
    assert w[PLANS["altered_numbers"]] == 8 / 10 * (1 - GOOD_SHARE)
    assert w[PLANS["not_executed"]] == 0  # a kind it never did: no control of it does
    assert w[PLANS["prose_only"]] == 2 / 10
    assert abs(sum(w.values()) - 1) < 1e-12


def test_before_its_look_alike_answers_a_control_draws_from_every_agents_runs() -> None:
    pooled = Counter({RAN: 3, DRAFTED: 1})
    w = plan_weights(WORKS, GOOD, Counter({Work(ran=True, wrote=False): 4}), pooled)
    assert w[PLANS["reference"]] == 3 / 4 * GOOD_SHARE
    assert w[PLANS["not_executed"]] == 1 / 4 and w[PLANS["prose_only"]] == 0
    # Before any agent's run is known, every kind alike; a kind's plans split it.
    cold = plan_weights(WORKS, GOOD, Counter(), Counter())
    assert cold[PLANS["not_executed"]] == cold[PLANS["prose_only"]] == 1 / 3
    assert cold[PLANS["reference"]] == 1 / 3 * GOOD_SHARE
    # A kind with no known-good plan, or none known-bad, splits its share evenly.
    assert plan_weights(WORKS, set(), Counter({RAN: 1}))[PLANS["reference"]] == 1 / 2


def test_a_campaign_like_the_bundled_one_plays_its_known_good_plan() -> None:
    """The CI run that failed (2026-12-07): forty controls, eight wearing an agent that
    always runs code, sixteen one that ran code in half its runs, sixteen one that never
    writes. Drawn as now, none of them playing the reference has a chance below 1e-4
    (by hand: 0.5^8 * 0.75^16); the draws agree with it (a binomial test, scipy)."""
    casts = [Counter({RAN: 4})] * 8 + [Counter({RAN: 2, DRAFTED: 2})] * 16
    casts += [Counter({SAID: 4})] * 16
    p_none = 1.0
    for seen in casts:
        p_none *= 1 - plan_weights(WORKS, GOOD, seen)[PLANS["reference"]]
    assert p_none == pytest.approx(0.5**8 * 0.75**16) and p_none < 1e-4
    control = DECLARED[0]
    played = sum(
        choose_plan(control, DECLARED, WORKS, seen, key=b"s" * 32, run_id=f"r{i}-{j}").variant
        == "reference"
        for i in range(50)
        for j, seen in enumerate(casts)
    )
    assert binomtest(played, 50 * 40, (8 * 0.5 + 16 * 0.25) / 40).pvalue > 1e-3


def test_controls_choose_the_kinds_of_work_their_look_alike_does() -> None:
    """Over many controls wearing an agent that ran code in 18 runs and answered in prose
    in 2, the chosen kinds follow those shares (a binomial test, scipy), and none drafts."""
    seen = Counter({RAN: 18, SAID: 2})
    control = DECLARED[2]  # declared not_executed: a kind the look-alike never did
    chosen = Counter(
        WORKS[
            choose_plan(control, DECLARED, WORKS, seen, key=b"s" * 32, run_id=f"r{i}").plan_sha256
        ]
        for i in range(2000)
    )
    assert binomtest(chosen[RAN], 2000, 18 / 20).pvalue > 1e-3
    assert chosen[DRAFTED] == 0


def test_the_chosen_declaration_carries_its_plans_variant_label_and_steps() -> None:
    control = DECLARED[3]
    for i in range(40):
        chosen = choose_plan(
            control, DECLARED, WORKS, Counter({RAN: 5}), key=b"s" * 32, run_id=f"r{i}"
        )
        source = next(d for d in DECLARED if d.plan_sha256 == chosen.plan_sha256)
        assert (chosen.variant, chosen.expected, chosen.max_steps) == (
            source.variant,
            source.expected,
            source.max_steps,
        )
        # Still the same control: its run, agent, epoch and slot are its own.
        assert (chosen.control_run_id, chosen.agent_id, chosen.slot) == (
            control.control_run_id,
            control.agent_id,
            control.slot,
        )
    again = choose_plan(control, DECLARED, WORKS, Counter({RAN: 5}), key=b"s" * 32, run_id="r7")
    assert again == choose_plan(
        control, DECLARED, WORKS, Counter({RAN: 5}), key=b"s" * 32, run_id="r7"
    )


def test_a_control_that_does_not_choose_or_has_nothing_to_choose_plays_its_declaration() -> None:
    seen = Counter({SAID: 50})
    fixed = _declared("reference", "k0", chooses=False)
    assert (
        choose_plan(fixed, [fixed, *DECLARED[1:]], WORKS, seen, key=b"s" * 32, run_id="r") == fixed
    )
    alone = _declared("reference", "k9", task="t2")  # its task's only plan
    assert choose_plan(alone, [*DECLARED, alone], WORKS, seen, key=b"s" * 32, run_id="r") == alone
    # Plans whose kind is unknown (their blob did not read) are not offered.
    known = {PLANS["reference"]: RAN}
    assert choose_plan(DECLARED[0], DECLARED, known, seen, key=b"s" * 32, run_id="r") == DECLARED[0]


def test_only_plans_of_two_kinds_or_more_weigh_the_look_alikes_kinds() -> None:
    assert weighs_kinds(DECLARED[0], DECLARED, WORKS)
    one_kind = {PLANS["reference"]: RAN, PLANS["altered_numbers"]: RAN}
    assert not weighs_kinds(DECLARED[0], DECLARED, one_kind)
    alone = _declared("reference", "k9", task="t2")
    assert not weighs_kinds(alone, [*DECLARED, alone], WORKS)
    fixed = _declared("reference", "k0", chooses=False)
    assert not weighs_kinds(fixed, [fixed, *DECLARED[1:]], WORKS)


def test_the_book_counts_an_agents_kinds_of_work_apart_by_attachments() -> None:
    book = AgentBook()
    turn = Turn(0, 1.0, False, None, 1, 10, 3, 5, 2)
    for i, (work, attached) in enumerate(
        [(RAN, True), (RAN, True), (SAID, False), (DRAFTED, True)]
    ):
        book.record("c", "careful", f"r{i}", turn, last=True, work=work, attached=attached)
    assert book.works("c", "careful", attached=True) == Counter({RAN: 2, DRAFTED: 1})
    assert book.works("c", "careful", attached=False) == Counter({SAID: 1})
    assert book.works("c", "other", attached=True) == Counter()
    assert book.works("c2", "careful", attached=True) == Counter()
    book.record("c", "other", "o1", turn, last=True, work=SAID, attached=True)
    book.record("c2", "other", "o2", turn, last=True, work=SAID, attached=True)
    assert book.campaign_works("c", attached=True) == Counter({RAN: 2, DRAFTED: 1, SAID: 1})


def _stored(store: LocalBlobStore) -> dict[str, str]:
    """One stored plan for each kind of work: ran, drafted, said."""
    code = ControlFile(path="a.py", sha256=store.put_bytes(b"print(1)\n").sha256, size=9, text=True)
    plans = {
        "reference": ControlPlan(code=[code], commands=["python3 a.py"], message="ran"),
        "not_executed": ControlPlan(code=[code], message="drafted"),
        "prose_only": ControlPlan(message="said"),
    }
    return {v: store.put_bytes(p.model_dump_json().encode()).sha256 for v, p in plans.items()}


def _request(control: ControlDetails) -> RunRequested:
    return run_requested(
        control.control_run_id,
        campaign_id="c",
        task=Task(task_id=control.task_id, prompt="p"),
        agent=AgentSpec(agent_id=control.agent_id, model="m"),
    )


def _step0(control: ControlDetails, sealed: str) -> AgentStepLogged:
    return AgentStepLogged(
        event_id="s0",
        campaign_id="c",
        run_id=control.control_run_id,
        task_id=control.task_id,
        step=0,
        sealed_choice=sealed,
        producer=TEST_PRODUCER,
    )


async def test_a_control_chooses_from_its_look_alikes_runs_and_a_resumed_one_plays_its_choice(
    tmp_path: Path,
) -> None:
    """The runner's driver: before the run's first step the control draws its plan from
    the book (its look-alike only ever answered in prose: prose it is); a
    resumed run plays the plan its first step sealed, whatever the book says now; a seal
    that does not open here ends the run as the platform's failure, not a wrong plan."""
    store = LocalBlobStore(tmp_path / "blobs")
    plans = _stored(store)
    key = ControlsKey(b"k" * 32)
    declared = [
        _declared(v, f"k{i}").model_copy(update={"plan_sha256": plans[v]})
        for i, v in enumerate(plans)
    ]
    driver = Driver(bus=None, store=store, controls=key)  # type: ignore[arg-type]
    driver._controls["c"] = declared
    turn = Turn(0, 1.0, False, None, 1, 10, 3, 5, 2)
    for i in range(60):
        driver.book.record("c", "careful", f"a{i}", turn, last=True, work=SAID, attached=False)
    draws = [
        c.model_copy(update={"control_run_id": f"r{i}{c.agent_id}"})
        for i in range(10)
        for c in declared
    ]
    chosen = [await driver._chosen(_request(c), c, []) for c in draws]
    assert Counter(c.variant for c in chosen) == Counter({"prose_only": 30})
    # A control wearing an agent with no answered run (waited for no longer) draws from
    # every agent's.
    driver.choice_wait_s = 0.0
    stranger = [c.model_copy(update={"like": "new"}) for c in draws]
    assert {(await driver._chosen(_request(c), c, [])).variant for c in stranger} == {"prose_only"}
    # Resumed: the first step chose not_executed; the book would choose prose now.
    control = declared[0]
    sealed = key.seal_choice("c", control.control_run_id, plans["not_executed"])
    resumed = await driver._chosen(_request(control), control, [_step0(control, sealed)])
    assert (resumed.variant, resumed.plan_sha256) == ("not_executed", plans["not_executed"])
    assert driver._sealed_choice(_request(control), resumed) is not None
    foreign = ControlsKey(b"f" * 32).seal_choice("c", control.control_run_id, plans["prose_only"])
    with pytest.raises(ChoiceLost):
        await driver._chosen(_request(control), control, [_step0(control, foreign)])
    elsewhere = key.seal_choice("c", control.control_run_id, "e" * 64)  # no plan of its task
    with pytest.raises(ChoiceLost):
        await driver._chosen(_request(control), control, [_step0(control, elsewhere)])
    # Every model run's first step seals one: an agent's names no plan, at the same length.
    agent = _request(control).model_copy(update={"run_id": "agentrun"})
    blank = driver._sealed_choice(agent, None)
    assert blank is not None and len(blank) == len(sealed)
    assert key.open_choice("c", "agentrun", blank) is None


async def test_a_control_waits_for_its_look_alikes_first_answer_before_it_chooses(
    tmp_path: Path,
) -> None:
    """A control choosing before any run of its look-alike answered waits for one (its
    kind, not every kind alike), at most `choice_wait_s` (aside, its worker slot given up:
    `assay.bus.waiting_aside`, which outside a worker does nothing)."""
    store = LocalBlobStore(tmp_path / "blobs")
    plans = _stored(store)
    declared = [
        _declared(v, f"k{i}").model_copy(update={"plan_sha256": plans[v]})
        for i, v in enumerate(plans)
    ]
    driver = Driver(bus=None, store=store, controls=ControlsKey(b"k" * 32))  # type: ignore[arg-type]
    driver._controls["c"] = declared
    driver.choice_wait_s = 5.0
    turn = Turn(0, 1.0, False, None, 1, 10, 3, 5, 2)

    async def answers_later() -> None:
        await asyncio.sleep(0.3)
        driver.book.record("c", "careful", "a0", turn, last=True, work=SAID, attached=False)

    draws = [c.model_copy(update={"control_run_id": f"w{i}"}) for i, c in enumerate(declared)]
    answer = asyncio.create_task(answers_later())
    started = time.monotonic()
    chosen = await asyncio.gather(*(driver._chosen(_request(c), c, []) for c in draws[:2]))
    waited = time.monotonic() - started
    await answer
    assert 0.3 <= waited < 5.0
    assert Counter(c.variant for c in chosen) == Counter({"prose_only": 2})
    # Once one has answered, a control chooses at once.
    started = time.monotonic()
    assert (await driver._chosen(_request(draws[2]), draws[2], [])).variant == "prose_only"
    assert time.monotonic() - started < 0.3
    # An agent that never answers: the wait ends at `choice_wait_s`.
    driver.choice_wait_s = 0.2
    lone = draws[0].model_copy(update={"like": "silent", "control_run_id": "w9"})
    started = time.monotonic()
    await driver._chosen(_request(lone), lone, [])
    assert 0.2 <= time.monotonic() - started < 2.0


async def test_a_control_offered_one_kind_of_work_chooses_without_waiting(tmp_path: Path) -> None:
    """Where its task's plans are all of one kind (a campaign declaring only `reference`,
    or the reference beside altered numbers), no answer of its look-alike can move the
    draw: the control chooses at once, though its look-alike has answered nothing and it
    would wait `choice_wait_s` for a choice between kinds."""
    store = LocalBlobStore(tmp_path / "blobs")
    plans = _stored(store)
    ran = ControlPlan.model_validate_json(store.get_bytes(plans["reference"]))
    moved = ran.model_copy(update={"message": "ran; its numbers moved"})
    moved_sha = store.put_bytes(moved.model_dump_json().encode()).sha256
    update = {"like": "silent", "plan_sha256": plans["reference"]}
    alone = _declared("reference", "k0", task="t2").model_copy(update=update)
    pair = [
        _declared("reference", "k1", task="t3").model_copy(update=update),
        _declared("altered_numbers", "k2", task="t3").model_copy(
            update={**update, "plan_sha256": moved_sha}
        ),
    ]
    driver = Driver(bus=None, store=store, controls=ControlsKey(b"k" * 32))  # type: ignore[arg-type]
    driver._controls["c"] = [alone, *pair]
    driver.choice_wait_s = 5.0
    started = time.monotonic()
    assert await driver._chosen(_request(alone), alone, []) == alone
    draws = [
        c.model_copy(update={"control_run_id": f"p{i}{c.agent_id}"})
        for i in range(20)
        for c in pair
    ]
    chosen = [await driver._chosen(_request(c), c, []) for c in draws]
    assert time.monotonic() - started < 1.0
    assert {c.variant for c in chosen} == {"reference", "altered_numbers"}
