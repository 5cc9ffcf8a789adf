"""A campaign's control runs: derived, stored and requested like any other run.

For each task with a reference, every control answer (:func:`assay.tasks.control_answers`)
becomes a stored :class:`ControlPlan` and one :class:`ControlDeclared`, sealed under the
deployment's controls secret (`assay.security.controls`: the runner and the aggregator
open it, judges and reviewers cannot), published before the tasks. The runner requests the control's run
when it admits the task, at the slot the declaration names among the agents' runs (never
first; among the runs of the agent it looks like, so it waits in the queue as they do), with the request of one of the campaign's agents (its model, family, limits)
under the control agent's own id. That id is salted with the campaign's secret salt (the
run id derives from it, so neither can be recomputed from public names) and shaped like
the agent's. What still tells a control apart is measured by `bench.blindness`.
"""

from __future__ import annotations

import hashlib
import hmac
import random
import shlex
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from assay.bus import Bus
from assay.security.controls import CONTROLS_KEY, ControlsKey
from assay.store import BlobStore
from assay.tasks import ControlAnswer, TaskDraft, control_answers, utf8_text
from assay_schemas import (
    KNOWN_GOOD,
    AgentSpec,
    CampaignSpec,
    ControlDeclared,
    ControlDetails,
    ControlFile,
    ControlPlan,
    Producer,
    Task,
    TaskSubmitted,
    run_id_for,
)

__all__ = [
    "CONTROLS_KEY",
    "campaign_salt",
    "plan_controls",
    "publish_controls",
    "with_control_agents",
]

MAX_CONTROL_FILE_BYTES = 256_000
"""Most bytes of one control file: it is written in one logged step (events ≤ 1 MiB)."""


def _reference(campaign: CampaignSpec, draft: TaskDraft) -> Path | None:
    if draft.folder is not None and (draft.folder / "reference").exists():
        return draft.folder / "reference"
    references = campaign.controls.references if campaign.controls else None
    return Path(references) / draft.task_id if references else None


_RUNNERS = {".py": "python3", ".r": "Rscript", ".sh": "bash", ".jl": "julia"}
"""How a control runs a script it wrote, by suffix (what an agent would type)."""
_EXECUTED = frozenset({KNOWN_GOOD, "altered_numbers", "files_removed"})
"""Variants that run their code as an agent would; the others never run anything."""
SCRIPTED_STEP_MS = 25.0
"""A control step's median think time in a scripted campaign (the scripted model
server's answer over HTTP, as the demo's agents get it)."""
MODEL_STEP_MS = 4000.0
"""A control step's median think time beside real models."""


def _ref(store: BlobStore, path: str, data: bytes) -> ControlFile:
    info = store.put_bytes(data)
    return ControlFile(path=path, sha256=info.sha256, size=info.size, text=utf8_text(data))


def _runner(path: str) -> str | None:
    return _RUNNERS.get(PurePosixPath(path).suffix.lower())


def _plan(
    store: BlobStore, answer: ControlAnswer, reference: ControlAnswer | None, step_ms: float
) -> tuple[str, int]:
    """The stored plan's hash and its most steps (its answer included).

    A derived variant that executes (`_EXECUTED`) writes its scripts, runs those at the
    workspace's top level and writes only the outputs they do not make (those not in the
    plan's `made`: the reference's run made the others); the others write what they
    leave, as an author's folder does."""
    files = sorted(answer.answer.files.items())
    runs = answer.variant in _EXECUTED
    code = [(p, d) for p, d in files if runs and _runner(p) and utf8_text(d)]
    commands = [f"{_runner(p)} {shlex.quote(p)}" for p, _ in code if "/" not in p]
    if not commands:
        code = []
    outputs = [(p, d) for p, d in files if (p, d) not in code]
    absent: list[str] = []
    made: list[str] = []
    if commands and reference is not None:  # what running the code makes but the answer lacks
        ran = reference.answer.files
        absent = sorted(set(ran) - set(answer.answer.files))
        # What the reference's run left as this answer leaves it: its text as is, its
        # bytes at all (a figure the code drew is the code's, whatever the library's bytes).
        made = [p for p, d in outputs if p in ran and (ran[p] == d or not utf8_text(d))]
    plan = ControlPlan(
        code=[_ref(store, p, d) for p, d in code],
        commands=commands,
        files=[_ref(store, p, d) for p, d in outputs],
        absent=absent,
        made=made,
        message=answer.answer.message,
        step_ms=step_ms,
    )
    return store.put_bytes(plan.model_dump_json().encode()).sha256, plan.max_steps()


def campaign_salt(secret: bytes, campaign_id: str) -> bytes:
    """A campaign's control salt: an HMAC of its id under the deployment's secret, so
    control agents' ids, run ids, names and order cannot be recomputed from public names
    by anyone who cannot read the home's keys (judges, reviewers)."""
    return hmac.new(secret, f"assay-controls\x1f{campaign_id}".encode(), hashlib.sha256).digest()


_ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def _look_alike(key: bytes, like: str) -> str:
    """An id shaped like `like` (same length, first character, separators, and letters
    and digits where it has them), its other characters drawn from `key`."""
    draw = random.Random(key)
    out = [like[0]]
    for c in like[1:]:
        if c.isdigit():
            out.append(str(draw.randrange(10)))
        elif c.isalpha():
            letter = draw.choice(_ALPHABET)
            out.append(letter.upper() if c.isupper() else letter)
        else:
            out.append(c)
    return "".join(out)


class _Disguise(NamedTuple):
    agent_id: str
    like: str | None


def _disguise(
    salt: bytes, campaign: CampaignSpec, kind: str, taken: set[str], dealt: int
) -> _Disguise:
    """A control agent's id and the campaign agent it looks like: as many control agents
    as kinds, each running every task as an agent does (a different kind on each task:
    `plan_controls`); its id shaped like that agent's, never one of the campaign's own.
    The look-alikes are dealt from salted decks of the campaign's model agents (`_deal`;
    `dealt` control agents have their look already), so every agent is worn by as many
    control agents as the others, give or take one: an agent worn by most controls would
    itself tell them."""
    models = [a for a in campaign.agents if a.kind == "model"]
    like = models[_deal(salt, len(models), dealt)] if models else None
    for attempt in range(1000):
        key = hmac.new(salt, f"{kind}\x1f{attempt}".encode(), hashlib.sha256).digest()
        agent_id = _look_alike(key[4:], like.agent_id) if like else "a" + key[4:12].hex()
        if agent_id not in taken:
            taken.add(agent_id)
            return _Disguise(agent_id, like.agent_id if like else None)
    raise ValueError(f"no control agent id left for {kind!r}")  # pragma: no cover


def _deal(salt: bytes, n: int, dealt: int) -> int:
    """The `dealt`-th card (0-based) of decks of `n` look-alikes, each deck shuffled by
    the salt: the first `n` control agents wear every agent once, the next `n` again."""
    deck = list(range(n))
    random.Random(
        hmac.new(salt, f"looks\x1f{dealt // n}".encode(), hashlib.sha256).digest()
    ).shuffle(deck)
    return deck[dealt % n]


def _slots(
    salt: bytes, task_id: str, order: list[str], likes: list[str | None], *, first: bool
) -> list[int]:
    """Where a task's controls go among its run requests (`order`: the agents' runs' agent
    ids, in request order), drawn by the salt: each among the runs of the agent it looks
    like (`likes`), anywhere from just before the first to just after the last, as one
    more epoch of that agent would be. A run's place in the queue sets how long it waits
    for the runner, so a control placed apart from its look-alike's runs would wait as
    they never do (the last measured tell: run durations). In the campaign's `first`
    task never first (the campaign's first request is an agent's)."""
    draw = random.Random(hmac.new(salt, f"slots\x1f{task_id}".encode(), hashlib.sha256).digest())
    merged: list[tuple[str | None, int | None]] = [(agent, None) for agent in order]
    for i in draw.sample(range(len(likes)), len(likes)):
        at = [j for j, (who, _) in enumerate(merged) if who == likes[i]]
        lo, hi = (at[0], at[-1] + 1) if at else (0, len(merged))
        if first and order:
            lo, hi = max(lo, 1), max(hi, 1)
        merged.insert(draw.randint(lo, hi), (likes[i], i))
    slots = [0] * len(likes)
    for place, (_, which) in enumerate(merged):
        if which is not None:
            slots[which] = place
    return slots


def _answers(
    campaign: CampaignSpec, draft: TaskDraft, task: Task, variants: Sequence[str]
) -> list[ControlAnswer]:
    authors = draft.folder / "controls" if draft.folder is not None else None
    return control_answers(
        task,
        list(variants),
        reference=_reference(campaign, draft),
        authors=authors,
        max_bytes=MAX_CONTROL_FILE_BYTES,
    )


def _kind(answer: ControlAnswer) -> str:
    return answer.variant or f"author:{answer.folder}"


def plan_controls(
    store: BlobStore,
    campaign: CampaignSpec,
    drafts: list[TaskDraft],
    tasks: list[TaskSubmitted],
    producer: Producer,
    *,
    secret: bytes,
) -> list[ControlDeclared]:
    """Every control run of the campaign declared (none without ``controls:``), files
    stored; `secret` is the deployment's `CONTROLS_KEY`. The runner requests the runs."""
    spec = campaign.controls
    if spec is None:
        return []
    salt = campaign_salt(secret, campaign.campaign_id)
    key = ControlsKey(secret)
    submitted = {t.task.task_id: t for t in tasks}
    taken = {a.agent_id for a in campaign.agents}
    step_ms = SCRIPTED_STEP_MS if campaign.scripted else MODEL_STEP_MS
    order = [a.agent_id for a in campaign.agents for _ in range(campaign.epochs)]
    out: list[ControlDeclared] = []
    every = [
        (submitted[d.task_id], _answers(campaign, d, submitted[d.task_id].task, spec.variants))
        for d in drafts
    ]
    # The kinds in order of first appearance, each with its place in the rotation.
    place = {k: i for i, k in enumerate(dict.fromkeys(_kind(a) for _, aa in every for a in aa))}
    agents: list[_Disguise] = []
    for kind in place:
        agents.append(_disguise(salt, campaign, kind, taken, len(agents)))
    for turn, (event, answers) in enumerate(every):
        task = event.task
        reference = next((a for a in answers if a.variant == KNOWN_GOOD), None)
        declared: list[ControlDetails] = []
        for answer in answers:
            plan, most = _plan(store, answer, reference, step_ms)
            # Each control agent plays another kind on each task (a rotation), so every
            # kind wears every look-alike: no kind's figures rest on one look, and no look
            # is tied to one kind of work across the campaign.
            look = agents[(place[_kind(answer)] + turn) % len(agents)]
            for epoch in range(spec.epochs):
                run_id = run_id_for(campaign.campaign_id, task.task_id, look.agent_id, epoch)
                declared.append(
                    ControlDetails(
                        campaign_id=campaign.campaign_id,
                        task_id=task.task_id,
                        control_run_id=run_id,
                        variant=answer.variant,
                        folder=answer.folder,
                        expected=answer.expected,
                        plan_sha256=plan,
                        agent_id=look.agent_id,
                        like=look.like,
                        epoch=epoch,
                        max_steps=most,
                        chooses=spec.like_agents,
                    )
                )
        first = turn == 0
        likes = [d.like for d in declared]
        slots = _slots(salt, task.task_id, order, likes, first=first)
        out += _sealed(key, declared, slots, event.event_id, producer)
    return out


def _sealed(
    key: ControlsKey,
    declared: list[ControlDetails],
    slots: list[int],
    cause: str,
    producer: Producer,
) -> list[ControlDeclared]:
    """A task's declarations, each at its slot, sealed under the deployment's key: judges
    and reviewers replay the log, and must not read which runs are controls."""
    placed = [d.model_copy(update={"slot": s}) for d, s in zip(declared, slots, strict=True)]
    return [key.declare(d, causation_id=cause, producer=producer) for d in placed]


def with_control_agents(
    campaign: CampaignSpec, declared: list[ControlDetails], *, secret: bytes
) -> CampaignSpec:
    """The campaign as published: each control agent in its roster like an agent (the
    spec of the agent it looks like, under its own id) at a place drawn by the salt, never
    first, and their number in ``controls.agents``, so that a reader of the log tells no
    control by its roster. The runner and the aggregator know them by the declarations."""
    looks: dict[str, str | None] = {}
    for d in declared:
        looks.setdefault(d.agent_id, d.like)
    if campaign.controls is None or not looks:
        return campaign
    by_id = {a.agent_id: a for a in campaign.agents}
    draw = random.Random(
        hmac.new(campaign_salt(secret, campaign.campaign_id), b"roster", hashlib.sha256).digest()
    )
    roster = list(campaign.agents)
    for agent_id, like in sorted(looks.items()):
        spec = by_id[like] if like in by_id else AgentSpec(agent_id=agent_id, model="control")
        roster.insert(
            draw.randrange(1, len(roster) + 1), spec.model_copy(update={"agent_id": agent_id})
        )
    controls = campaign.controls.model_copy(update={"agents": len(looks)})
    return campaign.model_copy(update={"agents": roster, "controls": controls})


async def publish_controls(bus: Bus, declared: list[ControlDeclared]) -> None:
    """Declare every control: before the tasks, so the runner that admits a task finds
    its controls and requests their runs among the agents'."""
    for event in declared:
        await bus.publish(event)
