"""A campaign's control runs: derived, stored and requested like any other run.

For each task with a reference, every control answer (:func:`assay.tasks.control_answers`)
becomes a stored :class:`ControlPlan`, one :class:`ControlDeclared` (read by the
aggregator only) and one ordinary ``RunRequested`` of a control agent. Its agent id is
salted with the campaign's secret salt (the run id derives from it, so neither can be
recomputed from public names), its model name and family are those of one of the
campaign's agents, the plan holds the answer and nothing about its status, and the
requests go out in an order shuffled by the salt. What still tells a control apart is
measured by `bench.blindness`.
"""

from __future__ import annotations

import hashlib
import hmac
import random
import shlex
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from assay.bus import Bus
from assay.store import BlobStore
from assay.tasks import ControlAnswer, TaskDraft, control_answers, utf8_text
from assay_schemas import (
    KNOWN_GOOD,
    AgentSpec,
    CampaignSpec,
    ControlDeclared,
    ControlFile,
    ControlPlan,
    Producer,
    RunRequested,
    TaskSubmitted,
    run_id_for,
)

__all__ = ["CONTROLS_KEY", "ControlRun", "campaign_salt", "plan_controls", "publish_controls"]

MAX_CONTROL_FILE_BYTES = 256_000
"""Most bytes of one control file: it is written in one logged step (events ≤ 1 MiB)."""


class ControlRun(NamedTuple):
    """One control: its declaration (aggregator only) and its run request."""

    declared: ControlDeclared
    request: RunRequested


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
    workspace's top level and writes only the outputs they do not make; the others write
    what they leave, as an author's folder does."""
    files = sorted(answer.answer.files.items())
    runs = answer.variant in _EXECUTED
    code = [(p, d) for p, d in files if runs and _runner(p) and utf8_text(d)]
    commands = [f"{_runner(p)} {shlex.quote(p)}" for p, _ in code if "/" not in p]
    if not commands:
        code = []
    outputs = [(p, d) for p, d in files if (p, d) not in code]
    absent: list[str] = []
    if commands and reference is not None:  # what running the code makes but the answer lacks
        absent = sorted(set(reference.answer.files) - set(answer.answer.files))
    plan = ControlPlan(
        code=[_ref(store, p, d) for p, d in code],
        commands=commands,
        files=[_ref(store, p, d) for p, d in outputs],
        absent=absent,
        message=answer.answer.message,
        step_ms=step_ms,
    )
    return store.put_bytes(plan.model_dump_json().encode()).sha256, plan.max_steps()


CONTROLS_KEY = "controls"
"""The deployment secret (`deployment_secret`) that salts each campaign's controls."""


def campaign_salt(secret: bytes, campaign_id: str) -> bytes:
    """A campaign's control salt: an HMAC of its id under the deployment's secret, so
    control agents' ids, run ids, names and order cannot be recomputed from public names
    by anyone who cannot read the home's keys (judges, reviewers)."""
    return hmac.new(secret, f"assay-controls\x1f{campaign_id}".encode(), hashlib.sha256).digest()


def _disguise(salt: bytes, campaign: CampaignSpec, task_id: str, kind: str) -> dict[str, str | None]:  # fmt: skip
    """A control agent's id, model name and family: the id salted, the model and family
    those of one of the campaign's own agents (drawn by the salt)."""
    key = hmac.new(salt, f"{task_id}\x1f{kind}".encode(), hashlib.sha256).hexdigest()
    like = campaign.agents[int(key[:8], 16) % len(campaign.agents)] if campaign.agents else None
    return {
        "agent_id": "a" + key[8:23],
        "model": like.model if like is not None else "control",
        "family": like.family if like is not None else None,
    }


def plan_controls(
    store: BlobStore,
    campaign: CampaignSpec,
    drafts: list[TaskDraft],
    tasks: list[TaskSubmitted],
    producer: Producer,
    *,
    secret: bytes,
) -> list[ControlRun]:
    """Every control run of the campaign (none without ``controls:``), files stored;
    `secret` is the deployment's `CONTROLS_KEY`."""
    spec = campaign.controls
    if spec is None:
        return []
    salt = campaign_salt(secret, campaign.campaign_id)
    submitted = {t.task.task_id: t for t in tasks}
    runs: list[ControlRun] = []
    for draft in drafts:
        event = submitted[draft.task_id]
        task = event.task
        authors = draft.folder / "controls" if draft.folder is not None else None
        answers = control_answers(
            task,
            list(spec.variants),
            reference=_reference(campaign, draft),
            authors=authors,
            max_bytes=MAX_CONTROL_FILE_BYTES,
        )
        reference = next((a for a in answers if a.variant == KNOWN_GOOD), None)
        step_ms = SCRIPTED_STEP_MS if campaign.scripted else MODEL_STEP_MS
        for answer in answers:
            plan, most = _plan(store, answer, reference, step_ms)
            kind = answer.variant or f"author:{answer.folder}"
            looks = _disguise(salt, campaign, task.task_id, kind)
            agent_id = str(looks["agent_id"])
            agent = AgentSpec(agent_id=agent_id, kind="control", model=str(looks["model"]),
                              family=looks["family"], control_plan=plan)  # fmt: skip
            # Its steps and its answer, whatever the campaign's step limit.
            steps = max(campaign.limits.max_steps, most)
            limits = campaign.limits.model_copy(update={"max_steps": steps})
            for epoch in range(spec.epochs):
                run_id = run_id_for(campaign.campaign_id, task.task_id, agent_id, epoch)
                request = RunRequested(
                    event_id=RunRequested.id_for(run_id),
                    campaign_id=campaign.campaign_id,
                    run_id=run_id,
                    task_id=task.task_id,
                    causation_id=event.event_id,
                    task=task,
                    agent=agent,
                    epoch=epoch,
                    limits=limits,
                    sandbox=campaign.sandbox,
                    scripted=campaign.scripted,
                    prices=campaign.prices,
                    producer=producer,
                )
                declared = ControlDeclared(
                    event_id=ControlDeclared.id_for(run_id),
                    campaign_id=campaign.campaign_id,
                    task_id=task.task_id,
                    causation_id=event.event_id,
                    control_run_id=run_id,
                    variant=answer.variant,
                    folder=answer.folder,
                    expected=answer.expected,
                    plan_sha256=plan,
                    producer=producer,
                )
                runs.append(ControlRun(declared, request))
    # Seeded by the salt: a rerun requests the same runs in the same order, no variant
    # always comes first or last, and nobody without the secret can predict the order.
    random.Random(salt).shuffle(runs)
    return runs


async def publish_controls(bus: Bus, runs: list[ControlRun]) -> None:
    """Declare every control (all declarations first), then request the control runs."""
    for run in runs:
        await bus.publish(run.declared)
    for run in runs:
        # Stamped when sent, like the runner's own requests (not when planned).
        await bus.publish(run.request.model_copy(update={"occurred_at": datetime.now(UTC)}))
